// The matrix's scenarios for Mastra (tests/frameworks/isolated/mastra, Mastra 0.24, and mastra_1, Mastra 1.x): the
// same agent, tools, scripted model (MockLanguageModelV2 from ai/test: a Mastra agent takes an AI SDK 5 model) and MCP
// client; each row's runner.mjs passes what its major version differs in (how a tool is made and labels its span, how
// a Mastra is made with the OtelExporter, how the exporter is flushed, the agent's id, how MCP tools are listed).
//
// Copied next to the runner in the framework's environment (envs.run), so `@mastra/*` and `ai` resolve there.

import { Agent } from "@mastra/core/agent";
import { MCPClient } from "@mastra/mcp";
import { simulateReadableStream } from "ai";
import { MockLanguageModelV2 } from "ai/test";

import { CHARGE, PAYMENT, PROVIDER, REFUND, STATE, CannotProduce, readCall, send_payment_slow, writeCall } from "./runner_common.mjs";

/** A scripted model: each turn is a list of [callId, toolName, args] calls, or a final text. */
export function scripted(turns) {
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

/**
 * The row's `run(scenario)`, from what its Mastra version differs in:
 * - `mastraTool(name, options = {}, body)`: the matrix tool `name` as a Mastra tool (createTool); `body(args, x)` gets
 *   the tool's execution options or context as `x` (its `abortSignal` read from it), the plain tool by default;
 * - `mastraWith(agent)`: a Mastra holding the agent as `billing`, tracing through the OtelExporter, with a store
 *   (the suspended run's snapshot, for tool approval);
 * - `flush()`: hands the exporter's spans to the in-memory exporter;
 * - `agentFields`: what the Agent constructor needs besides name, instructions, model and tools (1.x: its id);
 * - `listMcpTools(mcp)`: the MCPClient's tools, as an agent takes them.
 */
export function mastraScenarios({ mastraTool, mastraWith, flush, agentFields = {}, listMcpTools }) {
  const billingAgent = (model, tools) => mastraWith(new Agent({ ...agentFields, name: "billing", instructions: "Bill the customer.", model, tools })).getAgent("billing");

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
      await flush();
    }
  }

  /** The streamed run stops on the approval chunk; approved (`resume`), approveToolCall resumes it from its snapshot. */
  async function runApproval(tools, turns, resume) {
    const billing = billingAgent(scripted(turns), tools);
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
      const tools = await listMcpTools(mcp); // { billing_charge_card }: the server's name joined to the tool's
      const billing = billingAgent(scripted([[["call_m1", "billing_charge_card", { customer: "a", amount_cents: 1200 }]], "done"]), tools);
      await inSession((tracingOptions) => billing.generate("bill customer a", { maxSteps: 5, tracingOptions }));
    } finally {
      await mcp.disconnect();
    }
  }

  return async function run(scenario) {
    // stream_<scenario>: the same run through agent.stream, its fullStream consumed to the end (requested_never_ran
    // and approval_interrupt_resume stream already); stream_abandoned_after_request: the consumer stops reading at the
    // model's tool call (a chat UI whose user left)
    const streamed = scenario.startsWith("stream_");
    const abandon = scenario === "stream_abandoned_after_request";
    scenario = abandon ? "write_commits" : streamed ? scenario.slice("stream_".length) : scenario;
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
      tools.send_payment = mastraTool("send_payment", {}, (args, x) => send_payment_slow(args, x?.abortSignal));
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
      return runApproval(tools, [[writeCall()], "done"], scenario === "approval_interrupt_resume");
    } else if (scenario === "mcp_is_error") {
      return runMcp();
    } else {
      throw new CannotProduce(scenario);
    }
    const billing = billingAgent(scripted(turns), tools);
    if (!streamed) {
      await inSession((tracingOptions) => billing.generate("bill customer a", { ...options, tracingOptions }));
      return;
    }
    await inSession(async (tracingOptions) => {
      const result = await billing.stream("bill customer a", { ...options, tracingOptions });
      for await (const chunk of result.fullStream) {
        if (abandon && chunk.type === "tool-call") break;
      }
      await new Promise((resolve) => setTimeout(resolve, 200)); // what an abandoned stream still runs, and its spans' ends
    });
  };
}
