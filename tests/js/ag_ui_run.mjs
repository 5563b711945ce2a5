// Drives one AG-UI thread with the official client (@ag-ui/client's HttpAgent), run after run,
// and prints what it sees as JSON lines for the Python test that runs it.
//
// node ag_ui_run.mjs '<json>' where the json is {"url", "threadId", "steps": [...]}; each step is
//   {"token", "message": "text"}            a run with a new user message
//   {"token", "resume": {status, payload}}  a run answering every pending interrupt with it
//   {"token", "entries": [ResumeEntry...]}  a run with exactly these resume entries
// and any step may carry "forwardedProps" (the first run's {"session": {...}} starts the session with it).
// Each event is printed as {"step", "event"}; each run's end as {"step", "finished", "pending"}
// (the interrupts the client holds) or {"step", "failed"} with the client's error.
import { HttpAgent } from "@ag-ui/client";

const { url, threadId, steps } = JSON.parse(process.argv[2]);
const agent = new HttpAgent({ url, threadId });
const print = (line) => process.stdout.write(JSON.stringify(line) + "\n");

for (const [step, todo] of steps.entries()) {
  agent.headers = { Authorization: `Bearer ${todo.token}` };
  const parameters = todo.forwardedProps === undefined ? {} : { forwardedProps: todo.forwardedProps };
  if (todo.message !== undefined) {
    agent.addMessage({ id: `user-${step}-${Date.now()}`, role: "user", content: todo.message });
  }
  if (todo.resume !== undefined) {
    parameters.resume = agent.pendingInterrupts.map((interrupt) => ({ interruptId: interrupt.id, ...todo.resume }));
  }
  if (todo.entries !== undefined) {
    parameters.resume = todo.entries;
  }
  try {
    await agent.runAgent(parameters, { onEvent: ({ event }) => print({ step, event }) });
    print({ step, finished: true, pending: agent.pendingInterrupts });
  } catch (error) {
    print({ step, failed: String(error && error.message ? error.message : error) });
  }
}
