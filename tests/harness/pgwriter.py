"""A writer process for the PostgreSQL concurrency test: creates one session and appends to it.

    python tests/harness/pgwriter.py URL SESSION_ID COUNT SEED

Messages, with a move back (and sometimes a branch summary) or a label every few entries, so
the follower sees the leaf jump around. Prints the ids of the log, in order, as one JSON list
on stdout once everything is acknowledged.
"""

from __future__ import annotations

import json
import random
import sys

from sessiontree import PostgresStorage, Session


def main(argv: list[str]) -> int:
    url, sid, count, seed = argv[0], argv[1], int(argv[2]), int(argv[3])
    rng = random.Random(seed)
    with Session(PostgresStorage.create(url, cwd="/w", session_id=sid)) as session:
        ids: list[str] = []
        for n in range(count):
            roll = rng.random()
            if ids and roll < 0.08:
                before = session.entry_count()
                session.move_to(rng.choice(ids), "went back" if roll < 0.03 else None)
                ids.extend(e.id for e in session.get_entries()[before:])
            elif ids and roll < 0.12:
                ids.append(session.append_label(rng.choice(ids), f"mark {n}"))
            else:
                role = "user" if n % 2 == 0 else "assistant"
                ids.append(session.append_message({"role": role, "content": f"{sid} #{n}", "timestamp": n}))
    print(json.dumps(ids))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
