"""A chat history written the way Aider writes it, for tests of its import.

Each method follows Aider's own code (aider/io.py, `InputOutput`): `append_chat_history`
(a `> ` blockquote, a Markdown line break of two spaces, a final newline), `user_input` (each
line of the input behind `#### `), `ai_output` (the reply between blank lines), `tool_output`
/ `tool_warning` / `tool_error` (one blockquoted line per line of the message),
`confirm_ask` (the question with its options and the answer), and the session's first line
(`# aider chat started at` with the local time). What a session says is the test's; how it
lands in the file is Aider's.
"""

from __future__ import annotations

from pathlib import Path


class AiderHistory:
    def __init__(self, path: Path):
        self.path = path

    def _append(self, text: str, linebreak=False, blockquote=False, strip=True) -> None:
        if blockquote:
            if strip:
                text = text.strip()
            text = "> " + text
        if linebreak:
            if strip:
                text = text.rstrip()
            text = text + "  \n"
        if not text.endswith("\n"):
            text += "\n"
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(text)

    def started(self, when: str) -> None:
        """`InputOutput.__init__`: `when` as Aider formats now (%Y-%m-%d %H:%M:%S)."""
        self._append(f"\n# aider chat started at {when}\n\n")

    def user_input(self, inp: str) -> None:
        hist = inp.splitlines() if inp else ["<blank>"]
        joined = "  \n#### ".join(hist)
        self._append(f"\n#### {joined}", linebreak=True)

    def ai_output(self, content: str) -> None:
        self._append("\n" + content.strip() + "\n\n")

    def tool_output(self, *messages: str) -> None:
        if messages:
            self._append(" ".join(messages).strip(), linebreak=True, blockquote=True)

    def tool_warning(self, message: str) -> None:
        """`_tool_message` (tool_warning and tool_error alike)."""
        if message.strip():
            if "\n" in message:
                for line in message.splitlines():
                    self._append(line, linebreak=True, blockquote=True)
            else:
                self._append(message.strip(), linebreak=True, blockquote=True)

    tool_error = tool_warning

    def confirm_ask(self, question: str, answer: str) -> None:
        """`confirm_ask` with its default options: "(Y)es/(N)o [Yes]:" and the answer's
        first letter."""
        hist = f"{question} (Y)es/(N)o [Yes]: {answer[0].lower()}"
        self._append(hist.strip(), linebreak=True, blockquote=True)
