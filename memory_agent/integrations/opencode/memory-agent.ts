// memory-agent for opencode (V1 plugin API): capture each turn into the memory's journal and
// add relevant memory to the system prompt before the model answers a user message.
//
// Install: copy this file to ~/.config/opencode/plugins/ (or .opencode/plugins/ in a project);
// set MEMORY_AGENT_BIN (the memory-agent command, as `memory-agent init` prints it) and
// MEMORY_AGENT_HOME in opencode's environment. It calls `memory-agent hook <event>` with the
// same JSON Claude Code's hooks send, so everything memory-agent documents for hooks applies.
// Not tested by memory-agent's test suite (no opencode on the machine that runs it).
import type { Plugin } from "@opencode-ai/plugin"

const BIN = process.env.MEMORY_AGENT_BIN ?? "memory-agent"
const HOME = process.env.MEMORY_AGENT_HOME ?? `${process.env.HOME}/.memory-agent`

export const MemoryAgent: Plugin = async ({ $, directory }) => {
  const hook = async (event: string, payload: Record<string, unknown>): Promise<string> => {
    const stdin = new Response(JSON.stringify({ cwd: directory, ...payload }))
    const run = await $`${BIN} hook ${event} --home ${HOME} --client opencode < ${stdin}`
      .cwd(directory)
      .quiet()
      .nothrow()
    if (run.exitCode !== 0) return ""
    const out = run.stdout.toString().trim()
    if (!out) return ""
    try {
      return JSON.parse(out)?.hookSpecificOutput?.additionalContext ?? ""
    } catch {
      return ""
    }
  }
  const pending = new Map<string, string>() // session -> context for its next model call

  return {
    "chat.message": async (input, output) => {
      const prompt = output.parts
        .filter((p: any) => p.type === "text")
        .map((p: any) => p.text)
        .join("\n")
      const context = await hook("prompt", { session_id: input.sessionID, prompt })
      if (context) pending.set(input.sessionID, context)
    },
    "experimental.chat.system.transform": async (input, output) => {
      const context = input.sessionID ? pending.get(input.sessionID) : undefined
      if (context) {
        output.system.push(context)
        pending.delete(input.sessionID!)
      }
    },
    // Awaited, not fire-and-forget: a headless `opencode run` may exit before a background
    // call finishes (the record would be lost); a capture hook costs ~40 ms.
    "tool.execute.after": async (input, output) => {
      await hook("tool", {
        session_id: input.sessionID,
        tool_name: input.tool,
        tool_use_id: input.callID,
        tool_input: input.args,
        tool_response: { title: output.title, output: output.output, metadata: output.metadata },
      })
    },
    event: async ({ event }) => {
      if (event.type === "session.idle")
        await hook("stop", { session_id: (event as any).properties.sessionID })
    },
  }
}
