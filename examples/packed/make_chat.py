#!/usr/bin/python3
"""Writes DATA/chat.jsonl from scripts/make-dataset's DATA/mm.jsonl: the same
samples without their "text", so the source reads each sample's
"conversations" turns with their roles (a line with a "text" gives that text
and no turns; docs/records.md).

    examples/packed/make_chat.py DATA
"""

import json
import os
import sys


def main():
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    root = sys.argv[1]
    n = 0
    with open(os.path.join(root, "mm.jsonl"), encoding="utf-8") as src, \
            open(os.path.join(root, "chat.jsonl"), "w", encoding="utf-8") as out:
        for line in src:
            d = json.loads(line)
            if "conversations" not in d:
                continue
            d.pop("text", None)
            out.write(json.dumps(d, ensure_ascii=False) + "\n")
            n += 1
    print("%s: %d conversations" % (os.path.join(root, "chat.jsonl"), n))


if __name__ == "__main__":
    main()
