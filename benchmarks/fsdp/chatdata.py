"""Chat data for supervised fine-tuning, read and checked without torch: the node reads it
to train (:mod:`benchmarks.fsdp.sft`), the submitting side checks it before a job is queued.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class DataError(ValueError):
    """A data file the run cannot train on. Its name ends the traceback (or the ``error:``
    line) in the job's log, where the driver tells it from a crash (toolkit.joblog)."""


# ShareGPT's speakers and the chat roles they are
SHAREGPT_ROLES = {"system": "system", "human": "user", "user": "user", "gpt": "assistant",
                  "assistant": "assistant"}


def read_conversations(path: Path) -> list[list[dict[str, str]]]:
    """Conversations of a JSONL file, one per line: ``{"messages": [{"role", "content"},
    ...]}`` (OpenAI chat), ``{"conversations": [{"from", "value"}, ...]}`` (ShareGPT: human,
    gpt, system) or ``{"prompt": ..., "completion"|"response": ...}``. DataError names the
    line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot read: {exc}") from None
    out = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}:{number}: not JSON ({exc.msg})") from None
        out.append(_messages(obj, f"{path}:{number}"))
    if not out:
        raise DataError(f"{path}: no conversations")
    return out


def _messages(obj: Any, where: str) -> list[dict[str, str]]:
    if isinstance(obj, dict) and isinstance(obj.get("messages"), list):
        msgs = obj["messages"]
        if msgs and all(isinstance(m, dict) and isinstance(m.get("role"), str)
                        and isinstance(m.get("content"), str) for m in msgs):
            if any(m["role"] == "assistant" for m in msgs):
                return [{"role": m["role"], "content": m["content"]} for m in msgs]
            raise DataError(f"{where}: no assistant message to train on")
    if isinstance(obj, dict) and isinstance(obj.get("conversations"), list):
        turns = obj["conversations"]
        if turns and all(isinstance(t, dict) and t.get("from") in SHAREGPT_ROLES
                         and isinstance(t.get("value"), str) for t in turns):
            return _messages({"messages": [{"role": SHAREGPT_ROLES[t["from"]],
                                            "content": t["value"]} for t in turns]}, where)
        raise DataError(f"{where}: a ShareGPT conversation needs turns "
                         f"{{\"from\": {'|'.join(SHAREGPT_ROLES)}, \"value\": text}}")
    if isinstance(obj, dict) and isinstance(obj.get("prompt"), str):
        reply = obj.get("completion", obj.get("response"))
        if isinstance(reply, str):
            return [{"role": "user", "content": obj["prompt"]},
                    {"role": "assistant", "content": reply}]
    raise DataError(f"{where}: expected {{\"messages\": [{{\"role\", \"content\"}}, ...]}}, "
                     "{\"conversations\": [{\"from\", \"value\"}, ...]} or "
                     "{\"prompt\", \"completion\"}")
