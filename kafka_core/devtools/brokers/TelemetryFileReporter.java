// A broker-side KIP-714 receiver for the tests and benchmarks (kafka_telemetry.py beside it): Kafka
// accepts PushTelemetry only when a metrics reporter takes client telemetry. Compiled on first use
// against the dev broker's jars and loaded with metric.reporters; each push it receives becomes one
// line of the file named by the broker config kafka_core.telemetry.file:
//   <client instance id> <terminating> <content type> <client id> <push interval ms> <base64 OTLP bytes>
import java.io.FileWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.util.Base64;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.telemetry.ClientTelemetryContext;
import org.apache.kafka.server.telemetry.ClientTelemetryExporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporterProvider;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;

public class TelemetryFileReporter implements MetricsReporter, ClientTelemetryExporterProvider {
    private String path;

    @Override
    public void configure(Map<String, ?> configs) {
        Object value = configs.get("kafka_core.telemetry.file");
        path = value == null ? null : value.toString();
    }

    @Override
    public void init(List<KafkaMetric> metrics) {}

    @Override
    public void metricChange(KafkaMetric metric) {}

    @Override
    public void metricRemoval(KafkaMetric metric) {}

    @Override
    public void close() {}

    @Override
    public ClientTelemetryExporter clientTelemetryExporter() {
        return this::write;
    }

    private synchronized void write(ClientTelemetryContext context, ClientTelemetryPayload payload) {
        if (path == null) {
            return;
        }
        ByteBuffer data = payload.data().duplicate();
        byte[] bytes = new byte[data.remaining()];
        data.get(bytes);
        String line = payload.clientInstanceId() + " " + payload.isTerminating() + " "
            + payload.contentType().replace(' ', '_') + " "
            + context.authorizableRequestContext().clientId().replace(' ', '_') + " "
            + context.pushIntervalMs() + " "
            + Base64.getEncoder().encodeToString(bytes) + "\n";
        try (FileWriter out = new FileWriter(path, true)) {
            out.write(line);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
