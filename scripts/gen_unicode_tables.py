#!/usr/bin/env python3
"""Writes tokenizer/unicode_tables.h: the code point ranges of the character classes that GPT-2's
pre-tokenization pattern uses, from Python's unicodedata.

    \\p{L}  letters: general categories Lu Ll Lt Lm Lo
    \\p{N}  numbers: general categories Nd Nl No
    \\s     white space: the Unicode White_Space property, which is what the `regex` module that
           GPT-2 runs its pattern with matches. str.isspace() differs from it only at U+001C..U+001F
           (the information separators), which it counts as space and White_Space does not.

usage: gen_unicode_tables.py [OUTPUT]   (default tokenizer/unicode_tables.h)

OUTPUT is written by output_file.py's rules (a temporary file renamed at the end, a link at
OUTPUT followed).
"""
import sys
import unicodedata

from output_file import Failure, atomic_output, check_output

USAGE = "usage: gen_unicode_tables.py [OUTPUT]   (default tokenizer/unicode_tables.h)"


def ranges(pred):
    """Inclusive [first, last] runs of code points for which pred holds."""
    out, start = [], None
    for cp in range(0x110000 + 1):
        inside = cp <= 0x10FFFF and pred(cp)
        if inside and start is None:
            start = cp
        elif not inside and start is not None:
            out.append((start, cp - 1))
            start = None
    return out


def is_letter(cp):
    return unicodedata.category(chr(cp)) in ("Lu", "Ll", "Lt", "Lm", "Lo")


def is_number(cp):
    return unicodedata.category(chr(cp)) in ("Nd", "Nl", "No")


def is_white_space(cp):
    return chr(cp).isspace() and not 0x1C <= cp <= 0x1F


def c_table(name, rs):
    lines = [f"static const UnicodeRange {name}[{len(rs)}] = {{"]
    row = []
    for first, last in rs:
        row.append(f"{{0x{first:X}, 0x{last:X}}},")
        if len(row) == 6:
            lines.append("    " + " ".join(row))
            row = []
    if row:
        lines.append("    " + " ".join(row))
    lines.append("};")
    return "\n".join(lines)


def unicode_tables_h():
    """The header's text."""
    tables = [
        ("unicode_letters", ranges(is_letter)),
        ("unicode_numbers", ranges(is_number)),
        ("unicode_white_space", ranges(is_white_space)),
    ]
    parts = [
        "// tokenizer/unicode_tables.h: code point ranges of the classes GPT-2's pre-tokenization uses:",
        "// letters \\p{L} (Lu Ll Lt Lm Lo), numbers \\p{N} (Nd Nl No), white space \\s (Unicode White_Space).",
        f"// Sorted inclusive ranges from Unicode {unicodedata.unidata_version}, written by scripts/gen_unicode_tables.py;",
        "// rerun it rather than editing by hand.",
        "#ifndef FLASHGPT_UNICODE_TABLES_H",
        "#define FLASHGPT_UNICODE_TABLES_H",
        "",
        "#include <stdint.h>",
        "",
        "typedef struct { uint32_t first, last; } UnicodeRange;",
        "",
    ]
    for name, rs in tables:
        parts.append(c_table(name, rs))
        parts.append("")
    parts.append("#endif")
    return "\n".join(parts) + "\n"


def main(argv):
    if "-h" in argv or "--help" in argv:
        print(USAGE)
        return 0
    if len(argv) > 1 or argv and argv[0].startswith("-"):
        what = f"unknown flag {argv[0]}" if argv[0].startswith("-") else "more than one OUTPUT"
        print(f"error: {what} ({USAGE})", file=sys.stderr)
        return 1
    out_path = argv[0] if argv else "tokenizer/unicode_tables.h"
    try:
        check_output(out_path)
        text = unicode_tables_h()
        with atomic_output(out_path, binary=False) as f:
            f.write(text)
    except Failure as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
