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
import { Agent } from "@mastra/core/agent";
import { Mastra } from "@mastra/core/mastra";
import { InMemoryStore } from "@mastra/core/storage";
import { createTool } from "@mastra/core/tools";
import { MCPClient } from "@mastra/mcp";
import { OtelExporter } from "@mastra/otel-exporter";
import { simulateReadableStream } from "ai";
import { MockLanguageModelV2 } from "ai/test";
import { z } from "zod";

import {
  CHARGE,
  DESCRIPTIONS,
  EXPORTER,
  PAYMENT,
  PLAIN_TOOLS,
  PROVIDER,
  REFUND,
  STATE,
  CannotProduce,
  main,
  readCall,
  send_payment_slow,
  writeCall,
} from "./runner_common.mjs";

trace.disable(); // Mastra's deprecated telemetry traces through the global provider: not this row's instrumentation

const SCHEMAS = {
  lookup_customer: z.object({ customer: z.string() }),
  create_invoice: z.object({ customer: z.string(), amount_cents: z.number().int(), idempotency_key: z.string() }),
  charge_card: z.object({ customer: z.string(), amount_cents: z.number().int() }),
  send_payment: z.object({ customer: z.string(), amount_cents: z.number().int() }),
  refund_order: z.object({ order: z.string(), amount_cents: z.number().int() }),
};

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

/** A scripted model: each turn is a list of [callId, toolName, args] calls, or a final text. */
function scripted(turns) {
  let at = 0;
  const usage = { inputTokens: 10, outputTokens: 5, totalTokens: 15 };
  const next = () => {
    const turn = at < turns.length ? turns[at] : "done";
    at += 1;
    if (typeof turn === "string") return { content: [{ type: "text", text: turn }], finishReason: "stop" };
    const content = turn.map(([toolCallId, toolName, args]) => ({ type: "tool-call", toolCallId, toolName, input: JSON.stringify(args) }));
    return { content, finishReason: "tool-calls" };
  };
  const doStream = async () => {
    const { content, finishReason } = next();
    const chunks = [{ type: "stream-start", warnings: [] }];
    for (const part of content) {
      if (part.type === "text") chunks.push({ type: "text-start", id: "t" }, { type: "text-delta", id: "t", delta: part.text }, { type: "text-end", id: "t" });
      else chunks.push(part);
    }
    chunks.push({ type: "finish", finishReason, usage });
    return { stream: simulateReadableStream({ chunks, chunkDelayInMs: null }) };
  };
  return new MockLanguageModelV2({ modelId: "scripted", doGenerate: async () => ({ ...next(), usage, warnings: [] }), doStream });
}

// Mastra's AI tracing registry is one per process (a second config of one name is refused): registered once, by a
// Mastra of no agents; each scenario's Mastra (its agent, a fresh store) traces through it.
const OTEL = new OtelExporter({ provider: { custom: { endpoint: "http://127.0.0.1:9/v1/traces" } }, exporter: EXPORTER });
new Mastra({ observability: { configs: { otel: { serviceName: "billing", exporters: [OTEL] } } }, telemetry: { enabled: false }, logger: false });

function mastraWith(agent) {
  // storage: the suspended run's snapshot (tool approval)
  return new Mastra({ agents: { billing: agent }, storage: new InMemoryStore(), telemetry: { enabled: false }, logger: false });
}

/** Run `fn(tracingOptions)` under a plain session span, Mastra's runs joining its trace (tracingOptions.traceId /
 * parentSpanId): two runs of one session (interrupted, then resumed) make one trace. Flushes the exporter's batch. */
async function inSession(fn) {
  const span = PROVIDER.getTracer("conformance").startSpan("billing session");
  const { traceId, spanId } = span.spanContext();
  try {
    return await fn({ traceId, parentSpanId: spanId });
  } finally {
    span.end();
    await new Promise((resolve) => setTimeout(resolve, 50)); // Mastra exports a span's end event asynchronously
    await OTEL.processor?.forceFlush();
  }
}

async function run(scenario) {
  const tools = {
    lookup_customer: mastraTool("lookup_customer"),
    create_invoice: mastraTool("create_invoice"),
    refund_order: mastraTool("refund_order"),
  };
  let turns = ["done"];
  const options = { maxSteps: 5 };
  if (scenario === "read_ok") {
    turns = [[readCall()], "done"];
  } else if (scenario === "write_commits") {
    turns = [[writeCall()], "done"];
  } else if (scenario === "write_raises") {
    // Mastra lets no tool error out of the run: the tool's wrapper hands the error (a MastraError) to the model
    tools.charge_card = mastraTool("charge_card");
    turns = [[["call_c1", "charge_card", CHARGE]], "done"];
  } else if (scenario === "write_times_out") {
    // no tool timeout in Mastra: the run's abortSignal (AbortSignal.timeout) reaches the tool's execute options
    tools.send_payment = mastraTool("send_payment", {}, (args, execOptions) => send_payment_slow(args, execOptions?.abortSignal));
    turns = [[["call_p1", "send_payment", PAYMENT]], "done"];
    options.abortSignal = AbortSignal.timeout(200);
  } else if (scenario === "tool_error_to_model") {
    throw new CannotProduce("Mastra has one failure path: a thrown error becomes the tool's result for the model (a MastraError), which write_raises is");
  } else if (scenario === "parallel_one_fails") {
    turns = [[readCall(), ["call_f1", "refund_order", REFUND]], "done"];
  } else if (scenario === "framework_retries") {
    STATE.flaky = true; // no tool retry in Mastra (maxRetries retries the model): the model asks again
    turns = [[writeCall("call_w1")], [writeCall("call_w2")], "done"];
  } else if (scenario === "requested_never_ran" || scenario === "approval_interrupt_resume") {
    // the tool's requireApproval: the streamed run stops on a tool-call-approval chunk, its snapshot kept, until
    // approveToolCall / declineToolCall (Mastra's approval works on streams: generate() cannot be resumed)
    tools.create_invoice = mastraTool("create_invoice", { requireApproval: true });
    const resume = scenario === "approval_interrupt_resume";
    turns = [[writeCall()], "done"];
    return runApproval(tools, turns, resume);
  } else if (scenario === "mcp_is_error") {
    return runMcp();
  } else {
    throw new CannotProduce(scenario);
  }
  const agent = new Agent({ name: "billing", instructions: "Bill the customer.", model: scripted(turns), tools });
  const billing = mastraWith(agent).getAgent("billing");
  await inSession((tracingOptions) => billing.generate("bill customer a", { ...options, tracingOptions }));
}

/** The streamed run stops on the approval chunk; approved (`resume`), approveToolCall resumes it from its snapshot. */
async function runApproval(tools, turns, resume) {
  const agent = new Agent({ name: "billing", instructions: "Bill the customer.", model: scripted(turns), tools });
  const billing = mastraWith(agent).getAgent("billing");
  await inSession(async (tracingOptions) => {
    const first = await billing.stream("bill customer a", { maxSteps: 5, tracingOptions });
    let pending = null;
    for await (const chunk of first.fullStream) {
      if (chunk.type === "tool-call-approval") pending = chunk;
    }
    if (!pending) throw new Error("the run did not stop for approval");
    STATE.pending = pending.payload;
    if (!resume) return;
    const second = await billing.approveToolCall({ runId: pending.runId, toolCallId: pending.payload.toolCallId, tracingOptions });
    for await (const chunk of second.fullStream) {
      if (chunk.type === "error") throw chunk.payload?.error ?? new Error("the resumed run failed");
    }
  });
}

async function runMcp() {
  // @mastra/mcp's MCPClient starting the billing MCP server of runner_common.mjs as a process (stdio)
  const serve = `import(${JSON.stringify(new URL("./runner_common.mjs", import.meta.url).href)}).then((m) => m.serveMcpOverStdio())`;
  const mcp = new MCPClient({
    id: `billing-${process.pid}`,
    servers: { billing: { command: process.execPath, args: ["--input-type=module", "-e", serve], env: { PATH: process.env.PATH ?? "" } } },
  });
  try {
    const tools = await mcp.getTools(); // { billing_charge_card }: the server's name joined to the tool's
    const model = scripted([[["call_m1", "billing_charge_card", { customer: "a", amount_cents: 1200 }]], "done"]);
    const agent = new Agent({ name: "billing", instructions: "Bill the customer.", model, tools });
    const billing = mastraWith(agent).getAgent("billing");
    await inSession((tracingOptions) => billing.generate("bill customer a", { maxSteps: 5, tracingOptions }));
  } finally {
    await mcp.disconnect();
  }
}

await main(run);
