import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { serverSentEvents } from "../src/index.js";

/** A Response whose body arrives in the given pieces (split anywhere, even inside a line). */
function streamed(pieces: string[]): Response {
  const encoder = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const piece of pieces) controller.enqueue(encoder.encode(piece));
      controller.close();
    },
  });
  return new Response(body, { headers: { "content-type": "text/event-stream" } });
}

describe("serverSentEvents", () => {
  it("parses named events with ids and JSON data across arbitrary chunk boundaries; skips comments", async () => {
    const text =
      ': keep-alive\n\nevent: log\nid: c1\ndata: {"page":{"records":[1]}}\n\n' +
      'event: log\r\nid: c2\r\ndata: {"a":\r\ndata: 2}\r\n\r\ndata: plain text\n\n';
    for (const size of [1, 3, 7, text.length]) {
      const pieces: string[] = [];
      for (let i = 0; i < text.length; i += size) pieces.push(text.slice(i, i + size));
      const events = [];
      for await (const event of serverSentEvents(streamed(pieces))) events.push(event);
      assert.deepEqual(events, [
        { event: "log", id: "c1", data: { page: { records: [1] } } },
        { event: "log", id: "c2", data: { a: 2 } },
        { event: "message", id: "c2", data: "plain text" },
      ]);
    }
  });
});
