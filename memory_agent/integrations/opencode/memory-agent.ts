// memory-agent for opencode (plugin API of opencode 1.18): capture each turn into the memory's
// journal and add relevant memory to the agent's own model requests.
//
// Install: `memory-agent connect opencode --confirm` writes this file to
// ~/.config/opencode/plugins/ with the hook command and the memory home filled in (the fast
// command `init` prints for the other agents: `<python> -S <package>/memory_agent/hookrun.py`).
// A hand copy runs `memory-agent hook` (set MEMORY_AGENT_BIN to the memory-agent command and
// MEMORY_AGENT_HOME in opencode's environment); so does any install where MEMORY_AGENT_BIN is
// set. It sends the same JSON Claude Code's hooks send, so everything memory-agent documents
// for hooks applies. Tested end to end with opencode 1.18.33 (`tests/e2e`).
//
// Where each hook comes from (opencode 1.18.33):
//   session-start, prompt  `chat.message` (the user's message, before the first model call);
//                          the context is added to that user message in
//                          `experimental.chat.messages.transform`, which runs before each of
//                          the agent's model calls and not before title generation (the
//                          system-prompt transform also runs for the title call)
//   tool                   `tool.execute.after`, with bash's `metadata.exit` as `exit_code`
//   stop                   `session.idle`, with the last text the model wrote
//                          (`experimental.text.complete`) as the answer
//   session-end            `session.deleted`, and `dispose` (opencode's instance ends: the
//                          end of `opencode run`, or quitting the TUI) for every session
//                          this process saw and did not end
import type { Plugin } from "@opencode-ai/plugin"

const HOOK: string[] = process.env.MEMORY_AGENT_BIN
  ? [process.env.MEMORY_AGENT_BIN, "hook"]
  : ["memory-agent", "hook"]
const HOME = process.env.MEMORY_AGENT_HOME ?? `${process.env.HOME}/.memory-agent`
const KEEP = 200 // user messages whose injected context is kept (re-sent on each model call)

export const MemoryAgent: Plugin = async ({ $, directory }) => {
  const inflight = new Set<Promise<unknown>>()
  const hook = (event: string, payload: Record<string, unknown>): Promise<string> => {
    const call = (async () => {
      try {
        const stdin = new Response(JSON.stringify({ cwd: directory, ...payload }))
        const run = await $`${HOOK} ${event} --home ${HOME} --client opencode < ${stdin}`
          .cwd(directory)
          .quiet()
          .nothrow()
        const out = run.exitCode === 0 ? run.stdout.toString().trim() : ""
        return out ? (JSON.parse(out)?.hookSpecificOutput?.additionalContext ?? "") : ""
      } catch {
        return "" // a hook never breaks the agent (the hook itself logs to hooks.log)
      }
    })()
    // `event` handlers are not awaited by opencode: `dispose` waits for what is still running
    inflight.add(call)
    call.finally(() => inflight.delete(call))
    return call
  }
  const started = new Set<string>() // sessions with a session-start record
  const ended = new Set<string>()
  const answer = new Map<string, string>() // session -> the last text the model wrote
  const context = new Map<string, string[]>() // user message id -> what was injected for it

  const end = (sessionID: string, reason: string) => {
    if (!started.has(sessionID) || ended.has(sessionID)) return
    ended.add(sessionID)
    return hook("session-end", { session_id: sessionID, reason })
  }

  return {
    "chat.message": async (input, output) => {
      const session = input.sessionID
      const texts: string[] = []
      if (!started.has(session)) {
        started.add(session)
        ended.delete(session)
        texts.push(await hook("session-start", { session_id: session, source: "startup" }))
      }
      answer.delete(session)
      const prompt = output.parts
        .filter((p: any) => p.type === "text" && !p.synthetic)
        .map((p: any) => p.text)
        .join("\n")
      texts.push(await hook("prompt", { session_id: session, prompt }))
      const kept = texts.filter((t) => t)
      if (kept.length && output.message?.id) {
        context.set(output.message.id, kept)
        if (context.size > KEEP) context.delete(context.keys().next().value!)
      }
    },
    "experimental.chat.messages.transform": async (_input, output) => {
      for (const message of output.messages as any[]) {
        const texts = message.info?.role === "user" ? context.get(message.info.id) : undefined
        if (!texts) continue
        texts.forEach((text, i) => {
          const id = `${message.info.id}-memory-${i}`
          if (message.parts.some((p: any) => p.id === id)) return // added once
          message.parts.push({
            id,
            sessionID: message.info.sessionID,
            messageID: message.info.id,
            type: "text",
            synthetic: true,
            text,
          })
        })
      }
    },
    "experimental.text.complete": async (input, output) => {
      if (output.text?.trim()) answer.set(input.sessionID, output.text)
    },
    "tool.execute.after": async (input, output) => {
      const exit = (output.metadata as any)?.exit
      await hook("tool", {
        session_id: input.sessionID,
        tool_name: input.tool,
        tool_use_id: input.callID,
        tool_input: input.args,
        tool_response: {
          title: output.title,
          output: output.output,
          metadata: output.metadata,
          ...(typeof exit === "number" ? { exit_code: exit } : {}),
        },
      })
    },
    event: async ({ event }) => {
      const props = (event as any).properties ?? {}
      if (event.type === "session.idle" && props.sessionID) {
        const session: string = props.sessionID
        await hook("stop", { session_id: session, last_assistant_message: answer.get(session) ?? "" })
      } else if (event.type === "session.deleted" && props.info?.id) {
        await end(props.info.id, "deleted")
      }
    },
    // opencode awaits this when its instance ends (`opencode run` finishing, the TUI quitting)
    dispose: async () => {
      while (inflight.size) await Promise.allSettled([...inflight])
      await Promise.allSettled([...started].map((s) => end(s, "exit")))
    },
  } as any
}
