/** One server-sent event as received: its name, id and parsed JSON data. */
export interface ServerSentEvent {
  readonly event: string;
  readonly id: string | undefined;
  readonly data: unknown;
}

/**
 * The events of a `text/event-stream` response (an `sse` operation's result), in order, until
 * the server ends the stream. Comment lines (keep-alives) are skipped; data is parsed as JSON
 * (kiln's streams send JSON), or left as text when it is not JSON.
 */
export async function* serverSentEvents(response: Response): AsyncGenerator<ServerSentEvent> {
  if (response.body === null) return;
  const decoder = new TextDecoder();
  let buffer = "";
  let event = "message";
  let id: string | undefined;
  let data: string[] = [];
  const reader = response.body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let newline = buffer.indexOf("\n");
      while (newline !== -1) {
        const line = buffer.slice(0, newline).replace(/\r$/, "");
        buffer = buffer.slice(newline + 1);
        newline = buffer.indexOf("\n");
        if (line === "") {
          if (data.length > 0) {
            const text = data.join("\n");
            let parsed: unknown = text;
            try {
              parsed = JSON.parse(text);
            } catch {
              // Not JSON: hand over the text.
            }
            yield { event, id, data: parsed };
          }
          event = "message";
          data = [];
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon === -1 ? line : line.slice(0, colon);
        const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") event = value;
        else if (field === "data") data.push(value);
        else if (field === "id") id = value;
      }
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}
