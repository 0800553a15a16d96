// The OpenAI Agents SDK for JavaScript (@openai/agents) under OpenInference
// (@arizeai/openinference-instrumentation-openai-agents: a TracingProcessor that turns the SDK's own
// trace and spans into OpenTelemetry spans), scripted with a custom Model that opens a response span as
// the SDK's OpenAI models do. See framework.py for what each scenario is and what its plan must be.

import * as agents from "@openai/agents";
import { OpenAIAgentsInstrumentation } from "@arizeai/openinference-instrumentation-openai-agents";

import {
  CHARGE,
  DESCRIPTIONS,
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
import { SCHEMAS } from "./matrix_schemas.mjs";

const { Agent, Runner, Usage, tool, withResponseSpan, withTrace } = agents;

process.env.OPENAI_API_KEY ??= "sk-test-not-used"; // no request is sent: the model is scripted
new OpenAIAgentsInstrumentation({ tracerProvider: PROVIDER }).manuallyInstrument(agents); // exclusive: replaces the SDK's exporter


function agentTool(name, extra = {}, execute = PLAIN_TOOLS[name]) {
  return tool({ name, description: DESCRIPTIONS[name], parameters: SCHEMAS[name], execute, ...extra });
}

/** A scripted Model: each turn is a list of [callId, toolName, args] function calls, or a final text. Each
 * call opens a response span holding the request's input and a Responses-API-shaped response, as the SDK's
 * OpenAIResponsesModel does (what OpenInference reads the model's requested calls from). */
class ScriptedModel {
  constructor(turns) {
    this.turns = [...turns];
  }

  async getResponse(request) {
    return this.respond(request);
  }

  /** Streamed (run with `stream: true`): the turn's response span, then one `response_done` event with the output,
   * as the SDK's OpenAI models stream. */
  async *getStreamedResponse(request) {
    const { output, responseId } = await this.respond(request);
    yield { type: "response_started" };
    yield { type: "response_done", response: { id: responseId, usage: { requests: 1, inputTokens: 1, outputTokens: 1, totalTokens: 2 }, output } };
  }

  async respond(request) {
    const turn = this.turns.length ? this.turns.shift() : "done";
    const id = `resp_${this.turns.length}`;
    let output;
    let raw;
    if (typeof turn === "string") {
      const content = [{ type: "output_text", text: turn, annotations: [] }];
      output = [{ type: "message", id: "msg_final", role: "assistant", status: "completed", content }];
      raw = output;
    } else {
      output = turn.map(([callId, name, args]) => ({ type: "function_call", id: `fc_${callId}`, callId, name, arguments: JSON.stringify(args), status: "completed" }));
      raw = turn.map(([callId, name, args]) => ({ type: "function_call", id: `fc_${callId}`, call_id: callId, name, arguments: JSON.stringify(args), status: "completed" }));
    }
    await withResponseSpan(async (span) => {
      span.spanData.response_id = id;
      if (request.tracing === true) {
        span.spanData._input = request.input;
        span.spanData._response = { id, object: "response", model: "scripted", output: raw, status: "completed" };
      }
    });
    return { usage: new Usage(), output, responseId: id };
  }
}

async function run(scenario) {
  const streamed = scenario.startsWith("stream_");
  const abandon = scenario === "stream_abandoned_after_request";
  if (abandon) scenario = "write_commits";
  else if (streamed) scenario = scenario.slice("stream_".length);
  const tools = {
    lookup_customer: agentTool("lookup_customer"),
    create_invoice: agentTool("create_invoice"),
    refund_order: agentTool("refund_order"), // the SDK's default errorFunction: the error goes to the model
  };
  let turns = ["done"];
  if (scenario === "read_ok") {
    turns = [[readCall()], "done"];
  } else if (scenario === "write_commits") {
    turns = [[writeCall()], "done"];
  } else if (scenario === "write_raises") {
    tools.charge_card = agentTool("charge_card", { errorFunction: null }); // null: the error propagates out of the run
    turns = [[["call_c1", "charge_card", CHARGE]], "done"];
  } else if (scenario === "write_times_out") {
    // the SDK's own tool timeout (timeoutMs; timeoutBehavior error_as_result by default): its text goes to the model
    tools.send_payment = agentTool("send_payment", { timeoutMs: 200 }, (args, _context, details) => send_payment_slow(args, details?.signal));
    turns = [[["call_p1", "send_payment", PAYMENT]], "done"];
  } else if (scenario === "tool_error_to_model") {
    turns = [[["call_f1", "refund_order", REFUND]], "done"];
  } else if (scenario === "parallel_one_fails") {
    turns = [[readCall(), ["call_f1", "refund_order", REFUND]], "done"];
  } else if (scenario === "framework_retries") {
    STATE.flaky = true; // no tool retry in the SDK: the model asks again
    turns = [[writeCall("call_w1")], [writeCall("call_w2")], "done"];
  } else if (scenario === "requested_never_ran" || scenario === "approval_interrupt_resume") {
    tools.create_invoice = agentTool("create_invoice", { needsApproval: true });
    turns = [[writeCall()], "done"];
  } else if (scenario === "mcp_is_error") {
    // the SDK's own MCP client (MCPServerStdio) starting the billing MCP server of runner_common.mjs as a process
    const serve = `import(${JSON.stringify(new URL("./runner_common.mjs", import.meta.url).href)}).then((m) => m.serveMcpOverStdio())`;
    const server = new agents.MCPServerStdio({ name: "billing", command: process.execPath, args: ["--input-type=module", "-e", serve] });
    await server.connect();
    try {
      const agent = new Agent({ name: "billing", model: new ScriptedModel([[["call_m1", "charge_card", { customer: "a", amount_cents: 1200 }]], "done"]), mcpServers: [server] });
      await withTrace("billing session", () => new Runner().run(agent, "bill customer a"));
    } finally {
      await agents.getGlobalTraceProvider().forceFlush();
      await server.close();
    }
    return;
  } else {
    throw new CannotProduce(scenario);
  }
  const agent = new Agent({ name: "billing", model: new ScriptedModel(turns), tools: Object.values(tools) });
  const runner = new Runner();
  try {
    // One trace per scenario (the interrupted run and its resumption share it). The SDK ends a trace only when its
    // function returns (withTrace, and the runner's own trace alike): a run's error is caught inside, as an
    // application does, or the bridge's root span would never end.
    await withTrace("billing session", async () => {
      try {
        const result = await runner.run(agent, "bill customer a", streamed ? { stream: true } : {});
        if (streamed) {
          // stream_<scenario>: every event consumed; stream_abandoned_after_request: the consumer stops reading at
          // the model's tool call (a chat UI whose user left)
          for await (const event of result) {
            if (abandon && event.type === "run_item_stream_event" && event.name === "tool_called") break;
          }
          await result.completed.catch((error) => { STATE.raised = String(error?.stack ?? error); });
          return;
        }
        if (scenario !== "approval_interrupt_resume") return;
        for (const item of result.interruptions) result.state.approve(item);
        await runner.run(agent, result.state);
      } catch (error) {
        STATE.raised = String(error?.stack ?? error); // the run's error (errorFunction: null) ended it
      }
    });
  } finally {
    await agents.getGlobalTraceProvider().forceFlush();
  }
}

await main(run);
