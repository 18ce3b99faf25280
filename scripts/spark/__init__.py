"""Spark helpers: :mod:`scripts.spark.fetch_jars` fetches the Kafka connector jars."""
