// The matrix tools' input schemas (runner_common.mjs's tools) as zod objects, for the Node rows whose tools take one
// (the Vercel AI SDK's tool(), Mastra's createTool, the OpenAI Agents SDK's tool()). Copied next to each runner in
// its framework's environment (envs.run), so `zod` resolves to that environment's version.

import { z } from "zod";

export const SCHEMAS = {
  lookup_customer: z.object({ customer: z.string() }),
  create_invoice: z.object({ customer: z.string(), amount_cents: z.number().int(), idempotency_key: z.string() }),
  charge_card: z.object({ customer: z.string(), amount_cents: z.number().int() }),
  send_payment: z.object({ customer: z.string(), amount_cents: z.number().int() }),
  refund_order: z.object({ order: z.string(), amount_cents: z.number().int() }),
};
