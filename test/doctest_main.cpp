// doctest's main, compiled once (test/test.mk) and linked into every doctest program.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
