#!/usr/bin/env python3
"""test_man.py SRC_ROOT [BUILT_MAN_DIR] - the man pages cover the API.

- every name a page's NAME section lists is installed as a link to it
  (doc/man/meson.build), and every link is a name the page lists: `man
  rk_strerror` finds librk(3), not "No manual entry";
- every function the public headers of librk declare (runtime/include/rk/)
  is named by some page's NAME section;
- a definition-list term holds one prototype (two joined by "*, *"
  rendered as "...);, const char ..." in librk(3));
- with BUILT_MAN_DIR (scdoc found), every built page renders with
  `man --warnings` and no warning, when man is there.
Exit 0 pass, 1 fail."""
import os
import re
import shutil
import subprocess
import sys

src = sys.argv[1]
built = sys.argv[2] if len(sys.argv) > 2 else None
man_dir = os.path.join(src, "doc", "man")
errors = []


def pages_and_links():
    """{'librk.3': ['rk_strerror', ...]} from doc/man/meson.build."""
    text = open(os.path.join(man_dir, "meson.build")).read()
    block = text[text.index("rk_man_pages = {"):]
    block = block[: block.index("\n}")]
    return {m.group(1): re.findall(r"'([^']+)'", m.group(2))
            for m in re.finditer(r"'([\w.-]+\.\d)':\s*\[(.*?)\]", block, re.S)}


def name_section(page):
    text = open(os.path.join(man_dir, page + ".scd")).read()
    m = re.search(r"^# NAME\n(.*?)^# ", text, re.S | re.M)
    if not m:
        errors.append(f"{page}.scd: no NAME section")
        return set()
    names = " ".join(m.group(1).split()).split(" - ")[0]
    return {n.strip() for n in names.split(",")}


def header_functions():
    """Names of the functions runtime/include/rk/*.h declare or define."""
    inc = os.path.join(src, "runtime", "include", "rk")
    found = {}
    for f in sorted(os.listdir(inc)):
        if not (f.endswith(".h") or f.endswith(".h.in")):
            continue
        text = open(os.path.join(inc, f)).read()
        text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        text = re.sub(r"^\s*#.*?(?<!\\)$", " ", text, flags=re.S | re.M)  # macros, continued lines too
        # a name right after a type (a word or '*'): a declaration or a
        # definition, not a call (after '=', '(', ',')
        for m in re.finditer(r"(?:[A-Za-z0-9_]|\*)\s*\b(rk_[a-z][a-z0-9_]*)\s*\(", text):
            before = text[: m.start(1)].rstrip()
            if before.endswith("return"):
                continue
            found.setdefault(m.group(1), f)
    return found


pages = pages_and_links()
on_disk = {f[:-4] for f in os.listdir(man_dir) if f.endswith(".scd")}
for page in sorted(on_disk - set(pages)):
    errors.append(f"{page}.scd is not in doc/man/meson.build's rk_man_pages (not built, not installed)")

named = {}
for page, links in sorted(pages.items()):
    names = name_section(page)
    base = page.rsplit(".", 1)[0]
    for n in sorted(names - set(links) - {base}):
        errors.append(f"{page}: NAME lists {n}, but meson.build installs no link {n} for it")
    for n in sorted(set(links) - names):
        errors.append(f"{page}: meson.build links {n} to it, but its NAME section does not list it")
    for n in names:
        named[n] = page
    for i, line in enumerate(open(os.path.join(man_dir, page + ".scd")), 1):
        if re.search(r"\);\*,\s*\*", line):
            errors.append(f"{page}.scd:{i}: two prototypes in one term: {line.strip()}")

funcs = header_functions()
if len(funcs) < 50:
    errors.append(f"found only {len(funcs)} functions in the headers: the scan is broken")
for fn, header in sorted(funcs.items()):
    if fn not in named:
        errors.append(f"{fn} ({header}) is named by no man page: `man {fn}` finds nothing")
for must in ("rk_strerror", "rk_log_set_handler", "rk_runtime_actor_find", "rk_fields_parse"):
    if must not in named:
        errors.append(f"{must}: no man page")

if built and shutil.which("man"):
    env = dict(os.environ, LC_ALL="C.UTF-8", MANROFFSEQ="", MANWIDTH="80")
    for page in sorted(pages):
        path = os.path.join(built, page)
        if not os.path.exists(path):
            errors.append(f"{path} was not built")
            continue
        r = subprocess.run(["man", "--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z", path], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode or r.stderr.strip():
            errors.append(f"{page} renders with warnings: {r.stderr.strip()}")

print(f"{len(pages)} pages, {len(named)} names, {len(funcs)} header functions")
for e in errors:
    print("FAIL:", e)
sys.exit(1 if errors else 0)
