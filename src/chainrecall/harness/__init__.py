"""The agent harness: a Router and Workers over any OpenAI-compatible chat API.

client.py          the model client (/chat/completions, tool calls, SSE), ModelError
conversation.py    a session's append-only history, written to the store first
loop.py            the tool loop: logged requests, errors answered back, a hop bound
agents.py          Router, Workers, thread pass-through
router_context.py  the context text a trigger comes with (the seam for build_context)
recall.py          answering a question by hops: the planner, or a model
passthrough.py     the pass-through replay measurement
commands.py        `chainrecall demo`, `ask`, `log`
"""

from chainrecall.harness.agents import Dispatch, Harness
from chainrecall.harness.client import ChatClient, ChatReply, ModelError, ModelTimeout, Usage
from chainrecall.harness.conversation import Conversation
from chainrecall.harness.loop import Hop, LoopOutcome, Toolbox, run_tool_loop
from chainrecall.harness.recall import ask_model, plan_recall, start_ask

__all__ = [
    "ChatClient",
    "ChatReply",
    "Conversation",
    "Dispatch",
    "Harness",
    "Hop",
    "LoopOutcome",
    "ModelError",
    "ModelTimeout",
    "Toolbox",
    "Usage",
    "ask_model",
    "plan_recall",
    "run_tool_loop",
    "start_ask",
]
