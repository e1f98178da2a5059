// opencode-brain: memory on autopilot for OpenCode (written by `brain install opencode`;
// `brain uninstall opencode` removes it). The logic lives once, in Python: every event spawns
// the brain's hook runner with the event's JSON on stdin and a hard deadline, and a hook that
// fails or runs late changes nothing here (fail open).
import { spawn } from "node:child_process"

const PYTHON = "@PYTHON@"
const RUNNER = "@RUNNER@"
const ARGS = @ARGS@
const DEADLINE_MS = @DEADLINE_MS@
const MAX_JOURNAL = 400

function runHook(event, payload) {
  return new Promise((resolve) => {
    let out = ""
    let done = false
    const finish = (value) => {
      if (done) return
      done = true
      clearTimeout(timer)
      resolve(value)
    }
    let child
    try {
      child = spawn(PYTHON, ["-I", "-S", RUNNER, event, "--client", "opencode", ...ARGS], {
        stdio: ["pipe", "pipe", "ignore"],
      })
    } catch {
      resolve("")
      return
    }
    // The hook has its own, shorter deadline; this one also covers a Python that hangs.
    const timer = setTimeout(() => {
      try { child.kill("SIGKILL") } catch {}
      finish("")
    }, DEADLINE_MS)
    child.stdout.on("data", (d) => { out += d })
    child.on("error", () => finish(""))
    child.on("close", () => finish(out.trim()))
    child.stdin.on("error", () => {})
    child.stdin.end(JSON.stringify(payload))
  })
}

export const OpencodeBrain = async ({ directory, worktree }) => {
  const cwd = worktree && worktree !== "/" ? worktree : directory
  const sessionContext = new Map() // sessionID -> open_session briefing (every LLM call)
  const promptContext = new Map() // sessionID -> memories for the current prompt
  const journal = new Map() // sessionID -> transcript records for the handoff summary

  const record = (id, item) => {
    if (!id) return
    const list = journal.get(id) ?? []
    list.push(item)
    if (list.length > MAX_JOURNAL) list.splice(0, list.length - MAX_JOURNAL)
    journal.set(id, list)
  }
  const close = (event, id, name) =>
    runHook(event, { hook_event_name: name, session_id: id, cwd, transcript: journal.get(id) ?? [] })

  return {
    event: async ({ event }) => {
      const props = event?.properties ?? {}
      const id = props.sessionID ?? props.info?.id
      if (event?.type === "session.created" && !props.info?.parentID) {
        const text = await runHook("session-start", {
          hook_event_name: "SessionStart", session_id: id, cwd, source: "startup",
        })
        if (text) sessionContext.set(id, text)
      } else if (event?.type === "session.idle") {
        await close("stop", id, "Stop")
      } else if (event?.type === "session.deleted") {
        await close("session-end", id, "SessionEnd")
        sessionContext.delete(id)
        promptContext.delete(id)
        journal.delete(id)
      }
    },
    "chat.message": async (input, output) => {
      const text = (output?.parts ?? [])
        .filter((p) => p?.type === "text" && !p.synthetic)
        .map((p) => p.text)
        .join("\n")
      if (!text) return
      record(input.sessionID, { role: "user", text })
      const found = await runHook("user-prompt", {
        hook_event_name: "UserPromptSubmit", session_id: input.sessionID, cwd, prompt: text,
      })
      if (found) promptContext.set(input.sessionID, found)
      else promptContext.delete(input.sessionID)
    },
    "experimental.chat.system.transform": async (input, output) => {
      const id = input?.sessionID
      if (!id || !Array.isArray(output?.system)) return
      for (const text of [sessionContext.get(id), promptContext.get(id)]) {
        if (text) output.system.push(text)
      }
    },
    "tool.execute.after": async (input, output) => {
      const args = input?.args ?? {}
      record(input?.sessionID, { tool: input?.tool, input: args })
      const file = args.filePath ?? args.path
      if (["read", "edit", "write", "patch"].includes(input?.tool) && typeof file === "string") {
        // What the turn read or edited: a note written in it cites the file.
        await runHook("post-tool", {
          hook_event_name: "PostToolUse", session_id: input.sessionID, cwd,
          tool_name: input.tool, tool_input: { file_path: file },
        })
        return
      }
      if (input?.tool !== "bash" || !args.command) return
      const exit = output?.metadata?.exit
      await runHook("post-tool", {
        hook_event_name: "PostToolUse", session_id: input.sessionID, cwd, tool_name: "Bash",
        tool_input: { command: args.command },
        tool_response: {
          stdout: String(output?.metadata?.output ?? output?.output ?? ""),
          exit_code: typeof exit === "number" ? exit : undefined,
        },
      })
    },
    "experimental.session.compacting": async (input) => {
      await close("pre-compact", input?.sessionID, "PreCompact")
    },
  }
}
