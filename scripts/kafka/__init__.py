"""The local Kafka: :mod:`scripts.kafka.localkafka` (also runnable by path; see docs/kafka.md)."""
