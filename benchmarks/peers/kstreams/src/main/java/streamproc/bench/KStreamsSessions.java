package streamproc.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.Stores;

/**
 * The Kafka Streams peer of {@code benchmarks/bench_peers.py}: {@code topologies/sessions.py} on the JVM.
 *
 * <p>Topology: {@code stream(input, String key, JSON value) -> groupByKey ->
 * windowedBy(SessionWindows.ofInactivityGapAndGrace(gap, grace)) -> emitStrategy(onWindowClose) ->
 * count(in-memory session store "session-clicks", retention --retention-ms) -> toStream ->
 * filter(value != null) -> map(user, {"user","start","end","clicks","duration_ms"}) -> to(output)}.
 * Output key = user id (string), value = that JSON object (start and end inclusive, epoch ms),
 * timestamp = session end: the same records streamproc writes.
 *
 * <p>Settings made comparable with the other peers: one stream thread, at-least-once, commit every
 * {@code --commit-interval-ms} (1000), producer {@code acks=all}, idempotent, {@code linger.ms=5}
 * (Kafka Streams' own default is 100), consumer {@code fetch.max.wait.ms=100},
 * {@code max.partition.fetch.bytes=4 MiB}, {@code max.poll.records=5000}, earliest offset reset.
 * {@code --cache-bytes N} sets {@code statestore.cache.max.bytes} (0 = no record cache; absent = the
 * default 10 MiB); Kafka Streams itself leaves the record cache off for a session store that emits
 * on window close, so the setting changes nothing in this topology (no other store).
 *
 * <p>{@code --store memory} (default) is the in-memory session store ({@code Stores.inMemorySessionStore});
 * {@code --store rocksdb} leaves the choice to Kafka Streams, which for emit-on-close picks its
 * RocksDB session store indexed by session end.
 *
 * <p>{@code --retention-ms} (default gap + grace) is the session store's retention. The in-memory
 * session store drops the sessions that ended more than the retention before stream time before
 * the emit-on-close step fetches the closed ones; with gap + grace those are exactly the sessions
 * due, so nothing would ever be emitted. The harness passes gap + grace + the largest stream-time
 * step between two records of a task (the jump to its end-of-input marker, plus one gap).
 *
 * <p>The internal {@code emit.interval.ms.kstreams.windowed.aggregation} is 0: Kafka
 * Streams otherwise looks for closed sessions at most once per second of wall-clock time and only
 * when a record arrives, so the sessions closed by the last record of a partition (the benchmark's
 * end-of-input marker) would never be emitted; streamproc looks after every record.
 *
 * <p>Usage: {@code java -cp CLASSPATH streamproc.bench.KStreamsSessions --bootstrap B --application-id G
 * --input T --output T --gap-ms N --grace-ms N --state-dir DIR [--store memory|rocksdb] [--retention-ms N] [--cache-bytes N]
 * [--commit-interval-ms N]}.
 * Runs until SIGTERM (the shutdown hook closes the streams client: last commit, clean leave); exits 1
 * if the client dies.
 */
public final class KStreamsSessions {
    private static final ObjectMapper JSON = new ObjectMapper();

    private KStreamsSessions() {
    }

    /** A JSON value serde: parses every value (as streamproc's {@code serde.JSON} does), writes compact JSON. */
    static Serde<JsonNode> jsonSerde() {
        final Serializer<JsonNode> ser = (topic, node) -> {
            if (node == null) {
                return null;
            }
            try {
                return JSON.writeValueAsBytes(node);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        };
        final Deserializer<JsonNode> de = (topic, bytes) -> {
            if (bytes == null) {
                return null;
            }
            try {
                return JSON.readTree(bytes);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        };
        return Serdes.serdeFrom(ser, de);
    }

    private static String arg(final String[] args, final String name, final String fallback) {
        for (int i = 0; i + 1 < args.length; i++) {
            if (args[i].equals(name)) {
                return args[i + 1];
            }
        }
        if (fallback == null) {
            throw new IllegalArgumentException("missing " + name);
        }
        return fallback;
    }

    public static void main(final String[] args) throws InterruptedException {
        final String input = arg(args, "--input", null);
        final String output = arg(args, "--output", null);
        final long gap = Long.parseLong(arg(args, "--gap-ms", null));
        final long grace = Long.parseLong(arg(args, "--grace-ms", null));
        final String cacheBytes = arg(args, "--cache-bytes", "");
        final long retention = Long.parseLong(arg(args, "--retention-ms", String.valueOf(gap + grace)));

        final Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, arg(args, "--application-id", null));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, arg(args, "--bootstrap", null));
        props.put(StreamsConfig.STATE_DIR_CONFIG, arg(args, "--state-dir", null));
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.AT_LEAST_ONCE);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, Long.parseLong(arg(args, "--commit-interval-ms", "1000")));
        if (!cacheBytes.isEmpty()) {
            props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, Long.parseLong(cacheBytes));
        }
        props.put(StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION, 0L);
        props.put(StreamsConfig.producerPrefix(ProducerConfig.ACKS_CONFIG), "all");
        props.put(StreamsConfig.producerPrefix(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG), true);
        props.put(StreamsConfig.producerPrefix(ProducerConfig.LINGER_MS_CONFIG), 5);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG), 100);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG), 4 * 1024 * 1024);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.MAX_POLL_RECORDS_CONFIG), 5000);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");

        final StreamsBuilder builder = new StreamsBuilder();
        final String storeType = arg(args, "--store", "memory");
        final Materialized<String, Long, SessionStore<Bytes, byte[]>> store;
        if ("memory".equals(storeType)) {
            store = Materialized.<String, Long>as(Stores.inMemorySessionStore("session-clicks", Duration.ofMillis(retention)));
        } else if ("rocksdb".equals(storeType)) {
            // Kafka Streams' own choice for a session store that emits on close: RocksDB, indexed by end time
            store = Materialized.<String, Long, SessionStore<Bytes, byte[]>>as("session-clicks")
                .withRetention(Duration.ofMillis(retention));
        } else {
            throw new IllegalArgumentException("--store: memory or rocksdb, got " + storeType);
        }
        store.withKeySerde(Serdes.String()).withValueSerde(Serdes.Long());
        builder.stream(input, Consumed.with(Serdes.String(), jsonSerde()))
            .groupByKey()
            .windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofMillis(gap), Duration.ofMillis(grace)))
            .emitStrategy(EmitStrategy.onWindowClose())
            .count(store)
            .toStream()
            .filter((window, clicks) -> clicks != null)
            .map((window, clicks) -> {
                final ObjectNode v = JSON.createObjectNode();
                final long start = window.window().start();
                final long end = window.window().end();
                v.put("user", window.key());
                v.put("start", start);
                v.put("end", end);
                v.put("clicks", clicks);
                v.put("duration_ms", end - start);
                return KeyValue.pair(window.key(), (JsonNode) v);
            })
            .to(output, Produced.with(Serdes.String(), jsonSerde()));

        final KafkaStreams streams = new KafkaStreams(builder.build(), props);
        final CountDownLatch done = new CountDownLatch(1);
        final int[] exit = {0};
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.ERROR || (now == KafkaStreams.State.NOT_RUNNING && done.getCount() > 0)) {
                exit[0] = 1;
                done.countDown();
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            done.countDown();
            streams.close(Duration.ofSeconds(30));
        }, "shutdown"));
        streams.start();
        done.await();
        if (exit[0] != 0) {
            streams.close(Duration.ofSeconds(10));
            System.exit(exit[0]);
        }
    }
}
