// An agent-shaped trace from the real OpenTelemetry JS SDK, exported over OTLP/gRPC,
// OTLP/HTTP protobuf or OTLP/HTTP JSON.
//
//   node agent.js URL [grpc | http/protobuf | http/json]
//
// URL: http://HOST:PORT for grpc (the default), http://HOST:PORT/v1/traces for HTTP.
// The exporters are the SDK's own: exporter-trace-otlp-grpc, exporter-trace-otlp-proto
// (OTLP/HTTP, binary protobuf) and exporter-trace-otlp-http (OTLP/HTTP, JSON).
//
// invoke_agent (root)
// ├── execute_tool customer.lookup   a declared read, ok
// └── execute_tool invoice.create    a declared write with an idempotency key that
//                                    timed out (status ERROR, exception TimeoutError)
//
// Prints one JSON line on stdout: the trace id and span ids (hex), so the test can
// check exactly these spans at the upstream. Exits non-zero if the export fails.
'use strict';

const { context, trace, SpanKind, SpanStatusCode } = require('@opentelemetry/api');
const { NodeTracerProvider, BatchSpanProcessor } = require('@opentelemetry/sdk-trace-node');
const { defaultResource, resourceFromAttributes } = require('@opentelemetry/resources');

const EXPORTERS = {
  grpc: '@opentelemetry/exporter-trace-otlp-grpc',
  'http/protobuf': '@opentelemetry/exporter-trace-otlp-proto',
  'http/json': '@opentelemetry/exporter-trace-otlp-http',
};

async function main() {
  const url = process.argv[2];
  const protocol = process.argv[3] || 'grpc';
  if (!url || !(protocol in EXPORTERS)) {
    console.error('usage: node agent.js URL [grpc | http/protobuf | http/json]');
    process.exit(2);
  }
  const { OTLPTraceExporter } = require(EXPORTERS[protocol]);
  const exporter = new OTLPTraceExporter({ url, timeoutMillis: 10000 });
  let exportFailed = null;
  const originalExport = exporter.export.bind(exporter);
  exporter.export = (spans, done) =>
    originalExport(spans, (result) => {
      if (result.code !== 0) exportFailed = result.error || new Error(`export result ${result.code}`);
      done(result);
    });
  const provider = new NodeTracerProvider({
    // The SDK's own telemetry.sdk.* attributes, with our service on top (as NodeSDK builds it).
    resource: defaultResource().merge(resourceFromAttributes({ 'service.name': 'node-invoice-agent', 'service.version': '1.2.3' })),
    spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: 100 })],
  });
  const tracer = provider.getTracer('tracefence-interop-node', '0.1.0');

  const root = tracer.startSpan('invoke_agent', {
    kind: SpanKind.INTERNAL,
    attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'invoice-agent' },
  });
  const inRoot = trace.setSpan(context.active(), root);

  const read = tracer.startSpan(
    'execute_tool customer.lookup',
    {
      kind: SpanKind.INTERNAL,
      attributes: {
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': 'customer.lookup',
        'gen_ai.tool.call.id': 'call_read_1',
        'gen_ai.tool.call.arguments': JSON.stringify({ customer_id: 'c-42' }),
        'tracefence.effect': 'read',
      },
    },
    inRoot,
  );
  read.end();

  const write = tracer.startSpan(
    'execute_tool invoice.create',
    {
      kind: SpanKind.INTERNAL,
      attributes: {
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': 'invoice.create',
        'gen_ai.tool.call.id': 'call_write_1',
        'gen_ai.tool.call.arguments': JSON.stringify({ customer_id: 'c-42', amount_cents: 120000, currency: 'EUR' }),
        'tracefence.effect': 'write',
        'tracefence.idempotency_key': 'inv-c-42-2024-06',
      },
    },
    inRoot,
  );
  const timeout = new Error('invoice service did not answer within 30s');
  timeout.name = 'TimeoutError';
  write.recordException(timeout);
  write.setStatus({ code: SpanStatusCode.ERROR, message: timeout.message });
  write.end();

  root.end();

  await provider.forceFlush();
  await provider.shutdown();
  if (exportFailed) {
    console.error(`export failed: ${exportFailed.message || exportFailed}`);
    process.exit(1);
  }
  const ids = (span) => span.spanContext().spanId;
  process.stdout.write(
    JSON.stringify({
      trace_id: root.spanContext().traceId,
      root: ids(root),
      read: ids(read),
      write: ids(write),
    }) + '\n',
  );
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(1);
});
