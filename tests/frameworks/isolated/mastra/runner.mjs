// Mastra (@mastra/core agents) under its AI tracing, exported as OpenTelemetry spans by @mastra/otel-exporter's
// OtelExporter (Mastra's documented route to OpenTelemetry), scripted with MockLanguageModelV2 from ai/test (a
// Mastra agent takes an AI SDK 5 model). See framework.py for what each scenario is and what its plan must be.
//
// The OtelExporter is handed this runner's in-memory exporter (its `exporter` option; the `custom` provider's
// endpoint is required by its config and never reached). Mastra's deprecated OTel "telemetry" (spans through the
// global tracer provider, off in 1.x) is switched off: the global provider is disabled here, so only the AI
// tracing's spans are collected. Mastra's AI spans are no OpenTelemetry spans (runner_common's `declare` finds no
// active span in a tool body), so a tool labels its span through Mastra's own API: the span's metadata, which the
// exporter writes as attributes.

import { trace } from "@opentelemetry/api";
import { Mastra } from "@mastra/core/mastra";
import { InMemoryStore } from "@mastra/core/storage";
import { createTool } from "@mastra/core/tools";
import { OtelExporter } from "@mastra/otel-exporter";

import { DESCRIPTIONS, EXPORTER, PLAIN_TOOLS, STATE, main } from "./runner_common.mjs";
import { mastraScenarios } from "./mastra_common.mjs";
import { SCHEMAS } from "./matrix_schemas.mjs";

trace.disable(); // Mastra's deprecated telemetry traces through the global provider: not this row's instrumentation

// What each tool declares (runner_common's tools declare on the active OpenTelemetry span, which Mastra's tool
// span is not): the effect, and the argument holding the idempotency key.
const EFFECTS = {
  lookup_customer: ["read"],
  create_invoice: ["write", "idempotency_key"],
  charge_card: ["write"],
  send_payment: ["write"],
  refund_order: ["write"],
};

/** Label Mastra's tool span as a Mastra tool body can: through its AI span's metadata, which the OtelExporter
 * writes as span attributes of the same keys (tracefence.effect, tracefence.idempotency_key). */
function declareOnMastraSpan(aiSpan, name, args) {
  const [effect, keyArgument] = EFFECTS[name];
  if (!aiSpan) {
    (STATE.unlabelled ??= []).push(effect);
    return;
  }
  const metadata = { "tracefence.effect": effect };
  if (keyArgument && args[keyArgument] != null) metadata["tracefence.idempotency_key"] = args[keyArgument];
  aiSpan.update({ metadata });
}

/** The matrix tool `name` as a Mastra tool (createTool); `body(args, execOptions)` defaults to the plain tool. */
function mastraTool(name, options = {}, body = PLAIN_TOOLS[name]) {
  return createTool({
    id: name,
    description: DESCRIPTIONS[name],
    inputSchema: SCHEMAS[name],
    ...options,
    execute: async ({ context, tracingContext }, execOptions) => {
      declareOnMastraSpan(tracingContext?.currentSpan, name, context);
      return body(context, execOptions);
    },
  });
}

// Mastra's AI tracing registry is one per process (a second config of one name is refused): registered once, by a
// Mastra of no agents; each scenario's Mastra (its agent, a fresh store) traces through it.
const OTEL = new OtelExporter({ provider: { custom: { endpoint: "http://127.0.0.1:9/v1/traces" } }, exporter: EXPORTER });
new Mastra({ observability: { configs: { otel: { serviceName: "billing", exporters: [OTEL] } } }, telemetry: { enabled: false }, logger: false });

function mastraWith(agent) {
  // storage: the suspended run's snapshot (tool approval)
  return new Mastra({ agents: { billing: agent }, storage: new InMemoryStore(), telemetry: { enabled: false }, logger: false });
}

await main(
  mastraScenarios({
    mastraTool,
    mastraWith,
    flush: async () => OTEL.processor?.forceFlush(),
    listMcpTools: (mcp) => mcp.getTools(),
  }),
);
