"""Repairs one known bug of openapi-python-client 0.29.1 in the generated package.

An operation whose required requestBody has several content types (Tern's POST /media: a
JSON import or a multipart upload) is generated with `body: A | B | Unset = UNSET` but
without importing `Unset`, so importing the module fails with NameError (and mypy reports
name-defined): https://github.com/openapi-generators/openapi-python-client/issues/1451
(fix proposed in PR #1478). No OpenAPI document can avoid it short of declaring the body
optional, which it is not. This adds the missing import and says which files it touched;
once the generator is fixed it touches nothing.

Usage: python patch_generated.py PACKAGE_DIR
"""

import re
import sys
from pathlib import Path

IMPORT = re.compile(r"^from \.\.\.types import (?P<names>[^\n(]+)$", re.MULTILINE)

patched = []
for path in sorted(Path(sys.argv[1]).glob("api/**/*.py")):
    source = path.read_text()
    match = IMPORT.search(source)
    if match is None or not re.search(r"\| Unset\b", source):
        continue
    names = [n.strip() for n in match["names"].split(",")]
    if "Unset" in names:
        continue
    line = "from ...types import " + ", ".join(sorted(names + ["Unset"], key=str.lower))
    path.write_text(source[: match.start()] + line + source[match.end() :])
    patched.append(str(path.relative_to(sys.argv[1])))

if patched:
    print(f"patched openapi-python-client issue #1451 (Unset not imported): {', '.join(patched)}")
else:
    print("openapi-python-client issue #1451 (Unset not imported): nothing to patch")
