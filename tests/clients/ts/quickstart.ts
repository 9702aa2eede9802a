// Quickstart: Tern's public API through openapi-fetch and the types openapi-typescript
// generates from the served document (generated/schema.d.ts).
//
// Written as a user would write it (no `as`, no `any`, no @ts-ignore); scripts/clients.sh
// type-checks it with `tsc --strict`, compiles it and runs it with node against a live
// `tern serve` whose network is `tern simulator`.
//
// Environment: TERN_BASE_URL (…/api/public/v1), TERN_API_KEY, TERN_CUSTOMER (a phone in E.164
// of a customer who has just written in, so the 24-hour window is open), TERN_SAMPLE_IMAGE
// (a PNG file).

import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import createClient from "openapi-fetch";
import type { components, paths } from "./generated/schema.js";

type Schemas = components["schemas"];
type ApiError = Schemas["Error"];
type Contact = Schemas["Contact"];
type Template = Schemas["Template"];
type Message = Schemas["Message"];
type SendMessageRequest = Schemas["SendMessageRequest"];
type Conversation = Schemas["Conversation"];
type WebhookSubscription = Schemas["WebhookSubscription"];

class ApiFailure extends Error {}

/** The body of a successful answer with one of `statuses`; throws otherwise. */
function expectOk<T>(
  result: { data?: T; error?: ApiError; response: Response },
  ...statuses: number[]
): T {
  const { data, error, response } = result;
  if (error !== undefined) {
    throw new ApiFailure(
      `HTTP ${response.status} ${error.code}: ${error.message} (request_id ${error.request_id}, details ${JSON.stringify(error.details)})`,
    );
  }
  if (!statuses.includes(response.status) || data === undefined) {
    throw new ApiFailure(`HTTP ${response.status}, expected ${statuses.join("/")}`);
  }
  return data;
}

function check(condition: boolean, what: string): void {
  if (!condition) throw new Error(`assertion failed: ${what}`);
  console.log(`  ok  ${what}`);
}

function env(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === "") throw new Error(`${name} is not set`);
  return value;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function main(): Promise<void> {
  const customer = env("TERN_CUSTOMER");
  const client = createClient<paths>({
    baseUrl: env("TERN_BASE_URL"),
    headers: { Authorization: `Bearer ${env("TERN_API_KEY")}` },
  });
  const run = randomUUID().slice(0, 8);

  // ---- contacts: create three, then page through all contacts two at a time --------------
  console.log("contacts");
  const tag = `ts-${run}`;
  const created: Contact[] = [];
  for (let i = 0; i < 3; i++) {
    const contact = expectOk(
      await client.POST("/contacts", {
        body: { phone: `+1 415 555 015${i}`, name: `TS Customer ${i}`, tags: [tag] },
      }),
      201, // 200 when a contact with this phone already exists
      200,
    );
    check(contact.tags.includes(tag), `contact ${contact.id} (${contact.phone}) has tag ${tag}`);
    created.push(contact);
  }
  const seen: Contact[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const page = expectOk(
      await client.GET("/contacts", { params: { query: { limit: 2, cursor } } }),
      200,
    );
    pages++;
    check(page.data.length <= 2, `page ${pages} has ${page.data.length} contacts (limit 2)`);
    seen.push(...page.data);
    cursor = page.next_cursor ?? undefined;
  } while (cursor !== undefined);
  const seenIds = new Set(seen.map((c) => c.id));
  check(pages >= 2, `${seen.length} contacts over ${pages} pages`);
  check(created.every((c) => seenIds.has(c.id)), "every created contact is listed");

  // ---- templates: the approved one and its ready-to-send example -------------------------
  console.log("templates");
  const templates: Template[] = expectOk(
    await client.GET("/templates", { params: { query: { status: "approved" } } }),
    200,
  ).data;
  const template = templates.find((t) => t.name === "order_shipped");
  if (template === undefined) throw new Error("template order_shipped is not listed");
  check(template.status === "approved", `template ${template.name} is approved`);

  // The example is a POST /messages body whose `to` is a placeholder the API refuses.
  const example: SendMessageRequest = template.example;
  const refused = await client.POST("/messages", {
    params: { header: { "Idempotency-Key": `ts-${run}-placeholder` } },
    body: example,
  });
  check(
    refused.error?.code === "validation_failed" && refused.error.details.reason === "to_placeholder",
    "the example as is: 400 validation_failed, reason to_placeholder",
  );
  const fromExample = expectOk(
    await client.POST("/messages", {
      params: { header: { "Idempotency-Key": `ts-${run}-example` } },
      body: { ...example, to: customer },
    }),
    202,
  );
  check(fromExample.template_name === "order_shipped", "template sent from its example");

  // ---- messages of every kind the quickstart shows --------------------------------------
  console.log("messages");
  const send = async (body: SendMessageRequest, key: string): Promise<Message> => {
    const message = expectOk(
      await client.POST("/messages", { params: { header: { "Idempotency-Key": key } }, body }),
      202,
      200,
    );
    console.log(`      ${message.type} ${message.id}: ${message.status}`);
    return message;
  };

  const text = await send(
    { to: customer, type: "text", text: { body: "Your order ships today." } },
    `ts-${run}-text`,
  );
  check(text.status === "accepted" && text.text === "Your order ships today.", "text accepted");
  const again = await send(
    { to: customer, type: "text", text: { body: "Your order ships today." } },
    `ts-${run}-text`,
  );
  check(again.id === text.id, "the same Idempotency-Key and body give the same message");

  const buttons = await send(
    {
      to: customer,
      type: "interactive",
      interactive: {
        type: "button",
        body: { text: "Is this delivery time fine?" },
        action: {
          buttons: [
            { type: "reply", reply: { id: "yes", title: "Yes" } },
            { type: "reply", reply: { id: "later", title: "Later" } },
          ],
        },
      },
    },
    `ts-${run}-buttons`,
  );
  check(buttons.type === "interactive", "interactive (buttons) accepted");

  const byComponents = await send(
    {
      to: customer,
      type: "template",
      template: {
        name: template.name,
        language: template.language,
        components: [
          {
            type: "body",
            parameters: [
              { type: "text", text: "Ada" },
              { type: "text", text: `A-${run}` },
            ],
          },
        ],
      },
    },
    `ts-${run}-components`,
  );
  check(byComponents.template_name === template.name, "template with components accepted");

  const byVariables = await send(
    {
      to: { contact_id: text.contact_id },
      type: "template",
      template: { name: template.name, language: template.language, variables: ["Ada", `B-${run}`] },
    },
    `ts-${run}-variables`,
  );
  check(byVariables.template_name === template.name, "template with variables (to a contact_id) accepted");

  const png = readFileSync(env("TERN_SAMPLE_IMAGE"));
  const media = expectOk(
    await client.POST("/media", {
      body: { file: new Blob([png], { type: "image/png" }) },
      bodySerializer(body) {
        const form = new FormData();
        if ("file" in body) form.append("file", body.file, "parcel.png");
        return form;
      },
    }),
    201,
  );
  check(
    media.mime_type === "image/png" && media.size_bytes === png.length,
    `media ${media.media_id} uploaded (${media.size_bytes} bytes)`,
  );
  const image = await send(
    { to: customer, type: "image", image: { media_id: media.media_id, caption: "Your parcel" } },
    `ts-${run}-image`,
  );
  check(image.media_id === media.media_id && image.text === "Your parcel", "image sent by media_id");

  // ---- follow the messages until the network reports them delivered --------------------
  console.log("statuses");
  for (const message of [text, buttons, byComponents, image]) {
    const deadline = Date.now() + 20_000;
    let current = message;
    while (current.status !== "delivered" && current.status !== "read") {
      if (current.status === "failed" || Date.now() > deadline) {
        throw new Error(`message ${current.id} is ${current.status}: ${JSON.stringify(current.failure)}`);
      }
      await sleep(250);
      current = expectOk(
        await client.GET("/messages/{message_id}", { params: { path: { message_id: current.id } } }),
        200,
      );
    }
    check(
      current.wamid?.startsWith("wamid.") === true,
      `${current.type} ${current.id} ${current.status} (${current.wamid})`,
    );
  }

  // ---- conversations ---------------------------------------------------------------------
  console.log("conversations");
  const conversations: Conversation[] = expectOk(
    await client.GET("/conversations", { params: { query: { window_state: "open" } } }),
    200,
  ).data;
  const conversation = conversations.find((c) => c.contact_id === text.contact_id);
  const expires = conversation?.window_expires_at;
  check(
    expires != null && Date.parse(expires) > Date.now(),
    `the customer's conversation is open until ${expires}`,
  );
  // The list names the person: no request per row to show who it is.
  check(
    conversation?.contact.phone === customer && conversation.contact.name != null,
    `the conversation is with ${conversation?.contact.name} (${conversation?.contact.phone})`,
  );

  // ---- a campaign to the contacts tagged above -------------------------------------------
  console.log("campaigns");
  const campaign = expectOk(
    await client.POST("/campaigns", {
      body: {
        name: `TypeScript quickstart ${run}`,
        template: {
          name: template.name,
          language: template.language,
          variables: [{ field: "name", fallback: "there" }, `C-${run}`],
        },
        audience: { tags: [tag] },
      },
    }),
    201,
  );
  check(campaign.status === "draft", `campaign ${campaign.id} is a draft`);
  const path = { params: { path: { campaign_id: campaign.id } } };
  const resolved = expectOk(await client.POST("/campaigns/{campaign_id}/resolve", path), 200);
  check(
    resolved.status === "ready" && resolved.recipient_count === 3,
    `resolved: ${resolved.recipient_count} recipients`,
  );
  const launched = expectOk(await client.POST("/campaigns/{campaign_id}/launch", path), 200);
  check(launched.status === "running" || launched.status === "completed", `launched: ${launched.status}`);
  const deadline = Date.now() + 20_000;
  let progress = expectOk(await client.GET("/campaigns/{campaign_id}/progress", path), 200);
  while (
    progress.status !== "completed" ||
    progress.sent + progress.delivered + progress.read !== progress.total
  ) {
    if (Date.now() > deadline) throw new Error(`campaign progress stuck: ${JSON.stringify(progress)}`);
    await sleep(250);
    progress = expectOk(await client.GET("/campaigns/{campaign_id}/progress", path), 200);
  }
  check(
    progress.total === 3 && progress.failed === 0 && progress.skipped === 0,
    `completed: ${progress.sent} sent, ${progress.delivered} delivered, ${progress.read} read of ${progress.total}`,
  );

  // ---- a webhook subscription ------------------------------------------------------------
  console.log("webhook subscriptions");
  const subscription: WebhookSubscription = expectOk(
    await client.POST("/webhook-subscriptions", {
      body: {
        url: "https://example.com/hook",
        events: ["message.status", "message.received"],
        description: `typescript quickstart ${run}`,
      },
    }),
    201,
  );
  check(
    subscription.secret?.startsWith("whsec_") === true,
    `subscription ${subscription.id} created; secret shown once`,
  );
  const webhook = { params: { path: { webhook_id: subscription.id } } };
  let listed = expectOk(await client.GET("/webhook-subscriptions"), 200).data;
  check(listed.some((s) => s.id === subscription.id && !s.secret), "listed, without its secret");
  const deleted = await client.DELETE("/webhook-subscriptions/{webhook_id}", webhook);
  check(deleted.response.status === 204, "deleted (204)");
  listed = expectOk(await client.GET("/webhook-subscriptions"), 200).data;
  check(listed.every((s) => s.id !== subscription.id), "no longer listed");

  console.log("typescript quickstart: all checks passed");
}

main().catch((e: unknown) => {
  console.error(`typescript quickstart FAILED: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
