// Reading a child process's (or stdin's) output line by line.

/** Lines of a stream, one at a time. */
export function lineReader(stream) {
  stream.setEncoding("utf8");
  const lines = [];
  const waiting = [];
  let buffered = "";
  stream.on("data", (chunk) => {
    buffered += chunk;
    let newline = buffered.indexOf("\n");
    while (newline >= 0) {
      const line = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      newline = buffered.indexOf("\n");
      const take = waiting.shift();
      if (take === undefined) lines.push(line);
      else take(line);
    }
  });
  return () => (lines.length > 0 ? Promise.resolve(lines.shift()) : new Promise((resolve) => waiting.push(resolve)));
}
