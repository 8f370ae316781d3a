#!/usr/bin/env python3
"""Writes a C++ source defining `const char NAME[]` with a file's text
(the OpenAPI schemas, kept as JSON in the source tree)."""
import sys

source, output, name = sys.argv[1:4]
text = open(source, encoding="utf-8").read()
with open(output, "w", encoding="utf-8") as out:
    out.write("namespace leasehold::apiserver {\n")
    out.write("extern const char %s[];\n" % name)
    out.write('const char %s[] = R"embedded(%s)embedded";\n' % (name, text))
    out.write("} // namespace leasehold::apiserver\n")
