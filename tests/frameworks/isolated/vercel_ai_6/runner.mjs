// The Vercel AI SDK 6 (a ToolLoopAgent) under its own OpenTelemetry spans (experimental_telemetry: AI SDK 4-5's
// ai.generateText / ai.toolCall spans), scripted with MockLanguageModelV3 from ai/test; the scenarios are
// ../vercel_ai_common.mjs's. See framework.py for what each scenario is and what its plan must be.

import { experimental_createMCPClient } from "@ai-sdk/mcp";
import { Experimental_StdioMCPTransport } from "@ai-sdk/mcp/mcp-stdio";
import * as ai from "ai";
import { MockLanguageModelV3 } from "ai/test";

import { main } from "./runner_common.mjs";
import { vercelAgentRunner } from "./vercel_ai_common.mjs";

const run = vercelAgentRunner({
  ai,
  MockModel: MockLanguageModelV3,
  telemetry: { experimental_telemetry: { isEnabled: true, recordInputs: true, recordOutputs: true, functionId: "billing" } },
  mcpClient: (transport) => experimental_createMCPClient({ transport }),
  StdioTransport: Experimental_StdioMCPTransport,
  toolTimeout: false, // no tool timeout in 6: the run's abortSignal reaches the tool's execute
});

await main(run);
