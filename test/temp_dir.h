// A fresh folder under /tmp for a test's files, removed with everything in it when it goes away.
// Include after <doctest/doctest.h>.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

struct TempDir {
    std::string path;
    explicit TempDir(const std::string& prefix = "test") {
        std::string tmpl = "/tmp/" + prefix + "_XXXXXX";
        REQUIRE(mkdtemp(&tmpl[0]) != nullptr);
        path = tmpl;
    }
    ~TempDir() {
        if (system(("rm -rf '" + path + "'").c_str()) != 0) fprintf(stderr, "could not remove %s\n", path.c_str());
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
};
