// A fresh folder under /tmp for a test's files, removed with everything in it when it goes away,
// and writing a file whole or reading it back whole.
// Include after <doctest/doctest.h>.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
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

// the whole file at path ("" if it cannot be read)
inline std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// writes bytes to path, replacing what was there; the test fails if it cannot
inline void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary);
    f.write(bytes.data(), (std::streamsize)bytes.size());
    REQUIRE(f.good());
}
