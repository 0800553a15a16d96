// Mastra 1.x (@mastra/core agents) under its observability (@mastra/observability's Observability), exported as
// OpenTelemetry spans by @mastra/otel-exporter's OtelExporter, scripted with MockLanguageModelV2 from ai/test. Mastra
// 1.x asks Node.js 22.13 in its engines; it runs here on Node.js 20 (npm only warns). See framework.py.
//
// The OtelExporter is handed this runner's in-memory exporter (its `exporter` option, shutdown ignored: each
// scenario's Mastra shuts its exporter down). A span's metadata is exported as mastra.metadata.<key>, so a tool
// cannot set tracefence.effect on its span: the operator's tool rules name the effects (framework.py).

import { trace } from "@opentelemetry/api";
import { Agent } from "@mastra/core/agent";
import { Mastra } from "@mastra/core/mastra";
import { InMemoryStore } from "@mastra/core/storage";
import { createTool } from "@mastra/core/tools";
import { MCPClient } from "@mastra/mcp";
import { Observability } from "@mastra/observability";
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

trace.disable(); // only Mastra's observability traces: no global provider for anything else

const SCHEMAS = {
  lookup_customer: z.object({ customer: z.string() }),
  create_invoice: z.object({ customer: z.string(), amount_cents: z.number().int(), idempotency_key: z.string() }),
  charge_card: z.object({ customer: z.string(), amount_cents: z.number().int() }),
  send_payment: z.object({ customer: z.string(), amount_cents: z.number().int() }),
  refund_order: z.object({ order: z.string(), amount_cents: z.number().int() }),
};

/** The matrix tool `name` as a Mastra tool (createTool); `body(args, context)` defaults to the plain tool. */
function mastraTool(name, options = {}, body = PLAIN_TOOLS[name]) {
  return createTool({ id: name, description: DESCRIPTIONS[name], inputSchema: SCHEMAS[name], ...options, execute: async (input, context) => body(input, context) });
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
    await OTEL?.flush();
    await new Promise((resolve) => setTimeout(resolve, 50));
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
    tools.send_payment = mastraTool("send_payment", {}, (args, context) => send_payment_slow(args, context?.abortSignal));
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
  const agent = new Agent({ id: "billing", name: "billing", instructions: "Bill the customer.", model: scripted(turns), tools });
  const billing = mastraWith(agent).getAgent("billing");
  await inSession((tracingOptions) => billing.generate("bill customer a", { ...options, tracingOptions }));
}

/** The streamed run stops on the approval chunk; approved (`resume`), approveToolCall resumes it from its snapshot. */
async function runApproval(tools, turns, resume) {
  const agent = new Agent({ id: "billing", name: "billing", instructions: "Bill the customer.", model: scripted(turns), tools });
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
    const tools = await mcp.listTools(); // { billing_charge_card }: the server's name joined to the tool's
    const model = scripted([[["call_m1", "billing_charge_card", { customer: "a", amount_cents: 1200 }]], "done"]);
    const agent = new Agent({ id: "billing", name: "billing", instructions: "Bill the customer.", model, tools });
    const billing = mastraWith(agent).getAgent("billing");
    await inSession((tracingOptions) => billing.generate("bill customer a", { maxSteps: 5, tracingOptions }));
  } finally {
    await mcp.disconnect();
  }
}

await main(run);
