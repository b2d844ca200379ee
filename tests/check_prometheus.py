#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""A strict checker of the Prometheus text exposition format 0.0.4, as ringlane writes it.

Stricter than Prometheus itself on purpose: every line must be a "# HELP", a "# TYPE" or a
sample; every family has exactly one HELP line followed at once by its TYPE line, both before
its samples; a family's samples follow its TYPE line with nothing between them (no family
twice); sample names equal the family name (counters end in _total); label names are valid
and not repeated; label values use only the escapes \\\\, \\" and \\n; values parse as floats;
no series appears twice; quantile labels only on summaries, le only on histograms (as promtool
checks); every family name starts with the given prefix.

    check_prometheus.py FILE [PREFIX]      (PREFIX ringlane_; exit 1 with the first error)
"""
import re
import sys

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
FLOAT = re.compile(r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|Inf|inf)\Z|NaN\Z")
TYPES = ("counter", "gauge", "summary", "histogram", "untyped")


class FormatError(Exception):
    pass


def parse_labels(text, pos, where):
    """Parses {name="value",...} from text[pos] == '{'; returns (labels, position after '}')."""
    labels = {}
    pos += 1
    while True:
        if text.startswith("}", pos):
            return labels, pos + 1
        m = LABEL_NAME.match(text, pos)
        if not m:
            raise FormatError(f"{where}: bad label name at {text[pos:pos + 20]!r}")
        name = m.group(0)
        if name.startswith("__"):
            raise FormatError(f"{where}: reserved label name {name!r}")
        if name in labels:
            raise FormatError(f"{where}: label {name!r} twice")
        pos = m.end()
        if not text.startswith('="', pos):
            raise FormatError(f"{where}: label {name!r} without =\"value\"")
        pos += 2
        value = []
        while True:
            if pos >= len(text):
                raise FormatError(f"{where}: label {name!r} value not closed")
            ch = text[pos]
            if ch == "\\":
                nxt = text[pos + 1:pos + 2]
                if nxt not in ("\\", '"', "n"):
                    raise FormatError(f"{where}: bad escape \\{nxt} in label {name!r}")
                value.append({"\\": "\\", '"': '"', "n": "\n"}[nxt])
                pos += 2
            elif ch == '"':
                pos += 1
                break
            elif ch == "\n":
                raise FormatError(f"{where}: raw line feed in label {name!r}")
            else:
                value.append(ch)
                pos += 1
        labels[name] = "".join(value)
        if text.startswith(",", pos):
            pos += 1
            if text.startswith("}", pos):
                return labels, pos + 1  # a trailing comma is allowed by the format
        elif not text.startswith("}", pos):
            raise FormatError(f"{where}: expected , or }} after label {name!r}")


def check(text, prefix="ringlane_"):
    """Returns {family: (type, samples)}; raises FormatError on the first fault."""
    if not text:
        raise FormatError("empty text")
    if not text.endswith("\n"):
        raise FormatError("the text does not end with a line feed")
    families = {}
    family = None  # the family whose samples may follow
    help_for = None  # a HELP line waiting for its TYPE
    series = set()
    for number, line in enumerate(text[:-1].split("\n"), 1):
        where = f"line {number}"
        if line.startswith("# HELP "):
            parts = line.split(" ", 3)
            if len(parts) < 4 or not NAME.match(parts[2]):
                raise FormatError(f"{where}: bad HELP line {line!r}")
            name = parts[2]
            if name in families or name == help_for:
                raise FormatError(f"{where}: family {name} declared twice")
            if help_for:
                raise FormatError(f"{where}: HELP of {help_for} without its TYPE")
            if re.search(r"\\[^\\n]", parts[3]) or parts[3].endswith("\\"):
                raise FormatError(f"{where}: bad escape in the HELP text")
            help_for = name
            family = None
        elif line.startswith("# TYPE "):
            parts = line.split(" ")
            if len(parts) != 4 or parts[2] != help_for or parts[3] not in TYPES:
                raise FormatError(f"{where}: TYPE line {line!r} does not follow its HELP line")
            name, kind = parts[2], parts[3]
            if not name.startswith(prefix):
                raise FormatError(f"{where}: family {name} does not start with {prefix}")
            if kind == "counter" and not name.endswith("_total"):
                raise FormatError(f"{where}: counter {name} does not end in _total")
            if kind != "counter" and name.endswith("_total"):
                raise FormatError(f"{where}: {kind} {name} ends in _total")
            families[name] = (kind, [])
            family = name
            help_for = None
        elif line.startswith("#") or not line:
            raise FormatError(f"{where}: a line that is no HELP, TYPE or sample: {line!r}")
        else:
            m = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line)
            if not m:
                raise FormatError(f"{where}: bad metric name in {line!r}")
            name = m.group(0)
            if family is None or name != family:
                raise FormatError(f"{where}: sample {name} outside its family "
                                  f"(the family declared last is {family})")
            pos = m.end()
            labels = {}
            if line.startswith("{", pos):
                labels, pos = parse_labels(line, pos, where)
            if not line.startswith(" ", pos):
                raise FormatError(f"{where}: no space before the value")
            rest = line[pos + 1:].split(" ")
            if len(rest) not in (1, 2) or not FLOAT.match(rest[0]):
                raise FormatError(f"{where}: bad value {line[pos + 1:]!r}")
            if len(rest) == 2 and not re.match(r"-?[0-9]+\Z", rest[1]):
                raise FormatError(f"{where}: bad timestamp {rest[1]!r}")
            kind = families[name][0]
            if "quantile" in labels and kind != "summary":
                raise FormatError(f"{where}: label quantile on a {kind}")
            if "le" in labels and kind != "histogram":
                raise FormatError(f"{where}: label le on a {kind}")
            key = (name, tuple(sorted(labels.items())))
            if key in series:
                raise FormatError(f"{where}: series {name}{labels} twice")
            series.add(key)
            value = float(rest[0])
            if families[name][0] == "counter" and not value >= 0:
                raise FormatError(f"{where}: counter {name} is {value}")
            families[name][1].append((labels, value))
    if help_for:
        raise FormatError(f"HELP of {help_for} without its TYPE at the end")
    return families


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        text = f.read()
    try:
        families = check(text, argv[2] if len(argv) == 3 else "ringlane_")
    except FormatError as e:
        print(f"{argv[1]}: {e}", file=sys.stderr)
        return 1
    samples = sum(len(s) for _, s in families.values())
    print(f"{argv[1]}: {len(families)} families, {samples} samples: well formed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
