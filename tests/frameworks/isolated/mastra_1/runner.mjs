// Mastra 1.x (@mastra/core agents) under its observability (@mastra/observability's Observability), exported as
// OpenTelemetry spans by @mastra/otel-exporter's OtelExporter, scripted with MockLanguageModelV2 from ai/test. Mastra
// 1.x asks Node.js 22.13 in its engines; it runs here on Node.js 20 (npm only warns). See framework.py.
//
// The OtelExporter is handed this runner's in-memory exporter (its `exporter` option, shutdown ignored: each
// scenario's Mastra shuts its exporter down). A span's metadata is exported as mastra.metadata.<key>, so a tool
// cannot set tracefence.effect on its span: the operator's tool rules name the effects (framework.py).

import { trace } from "@opentelemetry/api";
import { Mastra } from "@mastra/core/mastra";
import { InMemoryStore } from "@mastra/core/storage";
import { createTool } from "@mastra/core/tools";
import { Observability } from "@mastra/observability";
import { OtelExporter } from "@mastra/otel-exporter";

import { DESCRIPTIONS, EXPORTER, PLAIN_TOOLS, main } from "./runner_common.mjs";
import { mastraScenarios } from "./mastra_common.mjs";
import { SCHEMAS } from "./matrix_schemas.mjs";

trace.disable(); // only Mastra's observability traces: no global provider for anything else

/** The matrix tool `name` as a Mastra tool (createTool); `body(args, context)` defaults to the plain tool. */
function mastraTool(name, options = {}, body = PLAIN_TOOLS[name]) {
  return createTool({ id: name, description: DESCRIPTIONS[name], inputSchema: SCHEMAS[name], ...options, execute: async (input, context) => body(input, context) });
}

// The OtelExporter's span exporter: runner_common's in-memory one, kept open (each scenario's Mastra shuts its
// exporters down when the next is made).
const INTO_MEMORY = { export: (spans, done) => EXPORTER.export(spans, done), forceFlush: async () => {}, shutdown: async () => {} };
let OTEL = null;

function mastraWith(agent) {
  // signals.logs false: its log export would go to the (unused) endpoint, and flush() would wait on it
  OTEL = new OtelExporter({ provider: { custom: { endpoint: "http://127.0.0.1:9/v1/traces" } }, exporter: INTO_MEMORY, signals: { logs: false } });
  const observability = new Observability({ configs: { otel: { serviceName: "billing", exporters: [OTEL] } } });
  // storage: the suspended run's snapshot (tool approval)
  return new Mastra({ agents: { billing: agent }, storage: new InMemoryStore(), observability, logger: false });
}

await main(
  mastraScenarios({
    mastraTool,
    mastraWith,
    flush: async () => {
      await OTEL?.flush();
      await new Promise((resolve) => setTimeout(resolve, 50));
    },
    agentFields: { id: "billing" },
    listMcpTools: (mcp) => mcp.listTools(),
  }),
);
