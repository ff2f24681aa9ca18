"""The demo agent's prompt dispatch: what a prompt's text asks for, and the turn played around it.

Which work a prompt gets, the first of these that matches (case is ignored; the reply texts are in
`replies`):

1. "read PATH" / "write TEXT to PATH": file work through the client (`filework`: plan, tool_call,
   session/request_permission, fs/*);
2. a prompt starting with "ask me": the form (elicitation/create; its questions are in `elicitation`);
3. "notices", "notice SEVERITY: TEXT", "notice later SEVERITY: TEXT": session notices; a prompt starting
   with "compact": a context compaction with its summary (`notices`);
4. a kernel command ("what is in NAME?", "run CODE", "compute EXPR", "plot NAME"...): the session's
   `kernel` MCP server (`kernelwork`);
5. "what did I say first?": answered from the session's history (also after a load in a new process);
   "what did I say before?" (or ask / send): "You have sent N prompts before this one: "...", "..."", every
   earlier prompt of the session quoted in order (the first 20; the rest counted), so a fork or a branch
   shows which conversation it carries (a prompt whose first block is a conversation handed over, as
   acp_notebook/branching.py writes it, starts a new session's history with the prompts it lists; the blocks
   after it are the message); "what is your system prompt?": the system prompt the client gave, with its mode (`instructions`);
6. a file edit ("In PATH, replace `OLD` with `NEW`", "Create PATH containing `TEXT`"): file work by the
   edit contract in `tasks`;
7. "What is A OP B?": the arithmetic contract in `tasks` (last line ``Answer: N``);
8. otherwise the ordinary chat reply.

Tool calls carry the tool's programmatic `name` besides their title: "read_text_file" and
"write_text_file" for file work, "mcp__kernel__TOOL" for the kernel tools (as agents name MCP tools).

Around that work a turn runs the same way every time: a prompt containing "fallback" while the model
is smart switches to fast first (saved, and pushed as config_option_update); the thoughts stream, then
the reply in chunks of a few words (the agent's `delay` between chunks, cut short by a cancel); then
session_info_update (updatedAt; the title on the first turn and after "new topic: ...") and
usage_update (tokens and a made-up cost per model).

A PromptTurn lives for one session/prompt request, on the demo process's one event loop. It mutates
its session (the model on fallback, title, usage; the work it runs counts tool calls) and its
RunningTurn (what was streamed); the agent saves the session and answers the request.
"""

from __future__ import annotations

from typing import Any

from acp.exceptions import RequestError
from acp.meta import CLIENT_METHODS

from . import elicitation, instructions, notices, replies, tasks
from .filework import FileWork, client_error, parse_file_command, run_edit
from .host import TurnHost
from .kernelwork import KernelWork, parse_kernel_command
from .session import DemoSession, RunningTurn

__all__ = ["CONTEXT_WINDOW", "PRICE_PER_TOKEN", "PromptTurn"]

CONTEXT_WINDOW = 128_000
# Made-up prices (USD per demo token) so usage_update carries a cost that depends on the model.
PRICE_PER_TOKEN: dict[str, float] = {"fast": 0.000002, "smart": 0.00001}


class PromptTurn:
    """One prompt turn of one open session; `play` streams it to the client (TurnCancelled when the
    client cancels it, ConnectionError when the client is gone)."""

    def __init__(self, agent: TurnHost, session: DemoSession, text: str, running: RunningTurn) -> None:
        self.agent = agent
        self.session = session
        self.text = text
        self.running = running
        self.fell_back = False  # "fallback" switched smart to fast for this turn

    async def play(self) -> None:
        settings = self.session.settings
        if "fallback" in self.text.lower() and settings.model == "smart":
            settings.model = "fast"
            self.fell_back = True
            self.agent.save(self.session)
            await self.agent.push_options(self.session)
        thoughts = replies.thoughts(self.text, settings)
        for thought in thoughts:
            await self._stream("agent_thought_chunk", thought)
        reply = await self.reply()
        for piece in replies.chunk(reply):
            await self._stream("agent_message_chunk", piece)
            self.running.reply_sent += piece
        await self._finish(reply, thoughts)

    async def _stream(self, kind: str, text: str) -> None:
        await self.running.pause(self.agent.delay)
        await self.agent.update(self.session, {"sessionUpdate": kind, "content": replies.text_content(text)})
        self.running.chunks_sent += 1

    async def reply(self) -> str:
        """The reply text, by the order in the module docstring; file work, forms and kernel tools
        talk to the client (or the kernel) first and are reported in a sentence."""
        text, session, turn = self.text, self.session, self.running
        settings = session.settings
        sentence: str | None = None
        if (command := parse_file_command(text)) is not None:
            sentence = await FileWork(self.agent, session, command, turn).run()
        elif elicitation.asks_for_form(text):
            sentence = await self._ask()
        elif (notice_command := notices.parse_notice_command(text)) is not None:
            sentence = await notices.send_notices(self.agent, session, notice_command, turn)
        elif notices.asks_to_compact(text):
            sentence = await notices.compact(self.agent, session, turn)
        elif (kernel_command := parse_kernel_command(text)) is not None:
            sentence = await KernelWork(self.agent, session, kernel_command, turn).run()
        elif replies.asks_what_was_said_before(text):
            return replies.before_reply([exchange.user for exchange in session.history], settings,
                                        fell_back=self.fell_back)
        elif replies.asks_what_was_said_first(text):
            earlier = [exchange.user for exchange in session.history]
            return replies.recall_reply(earlier, settings, fell_back=self.fell_back)
        elif instructions.asks_for_system_prompt(text):
            sentence = instructions.system_prompt_reply(session.system_prompt)
        elif (edit := tasks.parse_edit(text)) is not None:
            sentence = await run_edit(self.agent, session, edit, turn)
        elif (task := tasks.parse_task(text)) is not None:
            return replies.task_reply(task, settings, fell_back=self.fell_back)
        else:
            return replies.chat_reply(text, settings, fell_back=self.fell_back)
        return replies.outcome_reply(settings, sentence, fell_back=self.fell_back)

    async def _ask(self) -> str:
        """Send the form (elicitation/create) and put the answers in a sentence. Declined,
        cancelled and failed forms get a sentence too; the turn goes on either way."""
        voice = replies.VOICES[self.session.settings.tone]
        if not self.agent.client_forms:
            return voice.no_form
        # Sent raw, like the demo's other frames, so the form goes out exactly as written (the SDK's
        # typed create_elicitation drops the schema's "type": "object" and turns 0 into 0.0).
        request = self.agent.wire().send_request(
            CLIENT_METHODS["elicitation_create"], elicitation.form_request(self.session.session_id)
        )
        try:
            answer = await self.running.unless_cancelled(request)
        except RequestError as exc:
            return voice.form_failed.format(error=client_error(exc))
        action = answer.get("action") if isinstance(answer, dict) else None
        if action == "accept":
            return elicitation.summarise_answers(answer.get("content"))
        if action == "decline":
            return voice.form_declined
        if action == "cancel":
            return voice.form_cancelled
        return voice.form_failed.format(error=f"an answer this agent does not know: {answer!r}"[:200])

    async def _finish(self, reply: str, thoughts: list[str]) -> None:
        """The turn's session_info_update and usage_update."""
        session = self.session
        session.touch()
        info: dict[str, Any] = {"sessionUpdate": "session_info_update", "updatedAt": session.updated_at}
        topic = replies.topic_of(self.text)
        if topic is not None or session.title is None:
            session.title = replies.title_from(topic if topic is not None else self.text)
            info["title"] = session.title
        await self.agent.update(session, info)
        tokens = replies.token_count(self.text, reply, *thoughts)
        session.tokens_used += tokens
        session.cost += tokens * PRICE_PER_TOKEN[session.settings.model]
        await self.agent.update(
            session,
            {
                "sessionUpdate": "usage_update",
                "used": session.tokens_used,
                "size": CONTEXT_WINDOW,
                "cost": {"amount": round(session.cost, 6), "currency": "USD"},
            },
        )
