package streamproc.conformance;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindowedKStream;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.TimeWindowedKStream;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.test.TestRecord;

/**
 * Runs conformance scenarios through Kafka Streams' own TopologyTestDriver.
 *
 * <p>Reads one JSON scenario per line on stdin and writes one JSON result per line on stdout:
 * {@code {"id", "steps": [[[key, value, timestamp], ...] per input record], "error"}}. A scenario
 * names an operator ({@code session}, {@code time_window}, {@code stream_table},
 * {@code stream_stream}, {@code stream_agg}), its parameters and its input records {@code [topic, key, value, ts]}.
 * Keys and values are strings; a windowed output key is written as {@code "key@start@end"}; the
 * joiner writes {@code left + "+" + right} with {@code "null"} for a missing side. Record caches
 * are off and the wall-clock throttles of emit-on-close and of outer-join results are 0, so every
 * result appears right after the record that caused it (as in streamproc).
 */
public final class Runner {
    private static final ObjectMapper JSON = new ObjectMapper();

    private Runner() {
    }

    public static void main(final String[] args) throws Exception {
        final PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        final BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            final JsonNode scenario = JSON.readTree(line);
            final ObjectNode result = JSON.createObjectNode();
            result.set("id", scenario.get("id"));
            try {
                result.set("steps", run(scenario));
                result.putNull("error");
            } catch (final Exception e) {
                result.putNull("steps");
                result.put("error", e.getClass().getName() + ": " + e.getMessage());
            }
            out.println(JSON.writeValueAsString(result));
        }
    }

    private static String text(final JsonNode node) {
        return node == null || node.isNull() ? null : node.asText();
    }

    private static ValueJoiner<String, String, String> joiner() {
        return (left, right) -> (left == null ? "null" : left) + "+" + (right == null ? "null" : right);
    }

    private static Topology topology(final JsonNode s) {
        final StreamsBuilder b = new StreamsBuilder();
        final Consumed<String, String> strings = Consumed.with(Serdes.String(), Serdes.String());
        final String op = s.get("op").asText();
        switch (op) {
            case "session":
                sessions(b.stream("in", strings).groupByKey(), s);
                break;
            case "time_window":
                timeWindows(b.stream("in", strings).groupByKey(), s);
                break;
            case "stream_table":
                streamTable(b, strings, s);
                break;
            case "stream_stream":
                streamStream(b, strings, s);
                break;
            case "stream_agg":
                streamAggregate(b.stream("in", strings), s);
                break;
            case "table_ops":
                tableOps(b.table("table", strings), s).toStream().to("out", Produced.with(Serdes.String(), Serdes.String()));
                break;
            case "table_join":
                tableJoin(b, strings, s);
                break;
            case "table_agg":
                tableAggregate(b.table("table", strings), s);
                break;
            default:
                throw new IllegalArgumentException("unknown op " + op);
        }
        return b.build();
    }

    private static EmitStrategy emit(final JsonNode s) {
        return "close".equals(s.get("emit").asText()) ? EmitStrategy.onWindowClose() : EmitStrategy.onWindowUpdate();
    }

    private static void sessions(final KGroupedStream<String, String> grouped, final JsonNode s) {
        final SessionWindowedKStream<String, String> windowed = grouped
            .windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofMillis(s.get("gap").asLong()),
                                                               Duration.ofMillis(s.get("grace").asLong())))
            .emitStrategy(emit(s));
        final String agg = s.get("agg").asText();
        final KTable<Windowed<String>, String> table;
        if ("count".equals(agg)) {
            table = windowed.count().mapValues(v -> v == null ? null : String.valueOf(v));
        } else if ("reduce".equals(agg)) {
            table = windowed.reduce((a, v) -> a + v);
        } else {
            table = windowed.aggregate(() -> "", (k, v, a) -> a + v, (k, a1, a2) -> a1 + a2,
                                       Materialized.with(Serdes.String(), Serdes.String()));
        }
        windowedSink(table);
    }

    private static void timeWindows(final KGroupedStream<String, String> grouped, final JsonNode s) {
        TimeWindows windows = TimeWindows.ofSizeAndGrace(Duration.ofMillis(s.get("size").asLong()),
                                                         Duration.ofMillis(s.get("grace").asLong()));
        windows = windows.advanceBy(Duration.ofMillis(s.get("advance").asLong()));
        final TimeWindowedKStream<String, String> windowed = grouped.windowedBy(windows).emitStrategy(emit(s));
        final String agg = s.get("agg").asText();
        final KTable<Windowed<String>, String> table;
        if ("count".equals(agg)) {
            table = windowed.count().mapValues(v -> v == null ? null : String.valueOf(v));
        } else if ("reduce".equals(agg)) {
            table = windowed.reduce((a, v) -> a + v);
        } else {
            table = windowed.aggregate(() -> "", (k, v, a) -> a + v, Materialized.with(Serdes.String(), Serdes.String()));
        }
        windowedSink(table);
    }

    private static void streamAggregate(final KStream<String, String> stream, final JsonNode s) {
        final String shape = s.get("shape").asText();
        final Grouped<String, String> grouped = Grouped.with(Serdes.String(), Serdes.String());
        final KGroupedStream<String, String> g;
        if ("wordcount".equals(shape)) {
            g = stream.flatMapValues(v -> v == null ? List.<String>of() : Arrays.asList(v.toLowerCase(Locale.ROOT).split(" ")))
                .groupBy((k, word) -> word, grouped);
        } else if ("group_by".equals(shape)) {
            g = stream.groupBy((k, v) -> v == null ? k : ("x".equals(v) || "y".equals(v) ? "xy" : "zw"), grouped);
        } else {
            g = stream.groupByKey(grouped);
        }
        final String agg = s.get("agg").asText();
        final KStream<String, String> out;
        if ("count".equals(agg)) {
            out = g.count().toStream().mapValues(v -> v == null ? null : String.valueOf(v));
        } else if ("reduce".equals(agg)) {
            out = g.reduce((a, v) -> a + v).toStream();
        } else {
            out = g.aggregate(() -> "", (k, v, a) -> a + v, Materialized.with(Serdes.String(), Serdes.String())).toStream();
        }
        out.to("out", Produced.with(Serdes.String(), Serdes.String()));
    }

    private static boolean passes(final String v) {
        return v.startsWith("x") || v.startsWith("y");
    }

    /** The table_ops shapes: filter, filter_not, map_values, filter_map, map_filter (see scenarios.py). */
    private static KTable<String, String> tableOps(final KTable<String, String> table, final JsonNode s) {
        switch (s.get("shape").asText()) {
            case "filter":
                return table.filter((k, v) -> passes(v));
            case "filter_not":
                return table.filterNot((k, v) -> passes(v));
            case "map_values":
                return table.mapValues(v -> v.toUpperCase(Locale.ROOT));
            case "filter_map":
                return table.filter((k, v) -> passes(v)).mapValues(v -> v + "!");
            default:
                return table.mapValues(v -> v + "!").filter((k, v) -> passes(v));
        }
    }

    private static void tableJoin(final StreamsBuilder b, final Consumed<String, String> strings, final JsonNode s) {
        KTable<String, String> left = b.table("left", strings);
        final KTable<String, String> right = b.table("right", strings);
        if (s.get("filtered").asBoolean()) {
            left = left.filter((k, v) -> passes(v));
        }
        final String kind = s.get("kind").asText();
        final KTable<String, String> result;
        if ("join".equals(kind)) {
            result = left.join(right, joiner());
        } else if ("left_join".equals(kind)) {
            result = left.leftJoin(right, joiner());
        } else {
            result = left.outerJoin(right, joiner());
        }
        result.toStream().to("out", Produced.with(Serdes.String(), Serdes.String()));
    }

    /** group_by (first letter of the value, rest of it; values starting with "w" have a null key). */
    private static void tableAggregate(final KTable<String, String> table, final JsonNode s) {
        final org.apache.kafka.streams.kstream.KGroupedTable<String, String> g = table.groupBy(
            (k, v) -> KeyValue.pair(v.startsWith("w") ? null : v.substring(0, 1), v.substring(1)),
            Grouped.with(Serdes.String(), Serdes.String()));
        final String agg = s.get("agg").asText();
        final KStream<String, String> out;
        if ("count".equals(agg)) {
            out = g.count().toStream().mapValues(v -> v == null ? null : String.valueOf(v));
        } else if ("reduce".equals(agg)) {
            out = g.reduce((a, v) -> a + v, (a, v) -> a.replaceFirst(v, "")).toStream();
        } else {
            out = g.aggregate(() -> "", (k, v, a) -> a + v, (k, v, a) -> a.replaceFirst(v, ""),
                              Materialized.with(Serdes.String(), Serdes.String())).toStream();
        }
        out.to("out", Produced.with(Serdes.String(), Serdes.String()));
    }

    private static void windowedSink(final KTable<Windowed<String>, String> table) {
        table.toStream()
            .map((w, v) -> KeyValue.pair(w.key() + "@" + w.window().start() + "@" + w.window().end(), v))
            .to("out", Produced.with(Serdes.String(), Serdes.String()));
    }

    private static void streamTable(final StreamsBuilder b, final Consumed<String, String> strings, final JsonNode s) {
        final KTable<String, String> table = b.table("table", strings, Materialized.<String, String>as(
                Stores.persistentVersionedKeyValueStore("versioned", Duration.ofMillis(s.get("history").asLong())))
            .withKeySerde(Serdes.String()).withValueSerde(Serdes.String()));
        final KStream<String, String> stream = b.stream("in", strings);
        final long grace = s.get("grace").asLong();
        Joined<String, String, String> joined = Joined.with(Serdes.String(), Serdes.String(), Serdes.String());
        if (grace > 0) {
            joined = joined.withGracePeriod(Duration.ofMillis(grace));
        }
        final KStream<String, String> result = "left_join".equals(s.get("kind").asText())
            ? stream.leftJoin(table, joiner(), joined)
            : stream.join(table, joiner(), joined);
        result.to("out", Produced.with(Serdes.String(), Serdes.String()));
    }

    private static void streamStream(final StreamsBuilder b, final Consumed<String, String> strings, final JsonNode s) {
        final KStream<String, String> left = b.stream("left", strings);
        final KStream<String, String> right = b.stream("right", strings);
        final JoinWindows windows = JoinWindows.ofTimeDifferenceAndGrace(Duration.ZERO,
                                                                         Duration.ofMillis(s.get("grace").asLong()))
            .before(Duration.ofMillis(s.get("before").asLong()))
            .after(Duration.ofMillis(s.get("after").asLong()));
        final StreamJoined<String, String, String> joined = StreamJoined.with(Serdes.String(), Serdes.String(),
                                                                              Serdes.String());
        final String kind = s.get("kind").asText();
        final KStream<String, String> result;
        if ("join".equals(kind)) {
            result = left.join(right, joiner(), windows, joined);
        } else if ("left_join".equals(kind)) {
            result = left.leftJoin(right, joiner(), windows, joined);
        } else {
            result = left.outerJoin(right, joiner(), windows, joined);
        }
        result.to("out", Produced.with(Serdes.String(), Serdes.String()));
    }

    private static ArrayNode run(final JsonNode s) throws Exception {
        final Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "conformance");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "unused:9092");
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.STATE_DIR_CONFIG, Files.createTempDirectory("conformance").toString());
        props.put(StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_OUTER_JOIN_SPURIOUS_RESULTS_FIX, 0L);
        props.put(StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION, 0L);
        final ArrayNode steps = JSON.createArrayNode();
        try (TopologyTestDriver driver = new TopologyTestDriver(topology(s), props)) {
            final Map<String, TestInputTopic<String, String>> inputs = new HashMap<>();
            final TestOutputTopic<String, String> output = driver.createOutputTopic(
                "out", Serdes.String().deserializer(), Serdes.String().deserializer());
            for (final JsonNode record : s.get("inputs")) {
                final String topic = record.get(0).asText();
                final TestInputTopic<String, String> input = inputs.computeIfAbsent(topic, t -> driver.createInputTopic(
                    t, Serdes.String().serializer(), Serdes.String().serializer()));
                input.pipeInput(new TestRecord<>(text(record.get(1)), text(record.get(2)), null,
                                                 record.get(3).asLong()));
                final ArrayNode step = JSON.createArrayNode();
                for (final TestRecord<String, String> r : output.readRecordsToList()) {
                    final ArrayNode o = JSON.createArrayNode();
                    o.add(r.key());
                    o.add(r.value());
                    o.add(r.timestamp());
                    step.add(o);
                }
                steps.add(step);
            }
        }
        return steps;
    }
}
