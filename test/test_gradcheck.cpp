// The gradient check tool (eval/gradcheck.cu) under the SIMT emulator, on a tiny model: it passes
// on the CUDA back end as it is, and fails, naming the tensor, when one gradient is deliberately
// scaled (-scale NAME=F, which multiplies the CUDA gradient of NAME before the comparison), so a
// wrong gradient cannot pass; bad flags end it with a message naming the flag.
#include <doctest/doctest.h>
#include "test/run_command.h"

#include <string>

static const char* TOOL = "./build/gradcheck_cu_emu_lssar";
// 2 layers, 64 channels, 2 heads (hd 32), V = 97 (padded to 128), T = 32, B = 2
static const std::string TINY = " -e d2c64h2v97 -t 32 -b 2 -p 3";

static int count(const std::string& s, const std::string& what) {
    int n = 0;
    for (size_t i = s.find(what); i != std::string::npos; i = s.find(what, i + 1)) n++;
    return n;
}

TEST_CASE("gradcheck passes on the CUDA back end, every activation and gradient compared") {
    Result r = run(std::string(TOOL) + TINY);
    INFO(r.output);
    CHECK(r.code == 0);
    CHECK(r.output.find("CPU in float64") != std::string::npos);
    CHECK(count(r.output, "\ngradient ") == 15);    // every parameter tensor
    CHECK(count(r.output, "\nactivation ") == 19);  // every activation the CUDA back end keeps
    CHECK(r.output.find("FAILED") == std::string::npos);
    CHECK(r.output.find("passed: 35 of 35 tensors") != std::string::npos);
}

TEST_CASE("a gradient scaled by 1.5 fails the check, and only that tensor") {
    for (const char* name : {"lnfw", "qkvw"}) {
        Result r = run(std::string(TOOL) + TINY + " -scale " + name + "=1.5");
        INFO(name << ":\n" << r.output);
        CHECK(r.code == 1);
        CHECK(count(r.output, "FAILED") == 2);  // its line and the verdict
        size_t line = r.output.find(std::string("\ngradient   d") + name + " ");
        REQUIRE(line != std::string::npos);
        CHECK(r.output.substr(line, r.output.find('\n', line + 1) - line).find("FAILED") != std::string::npos);
    }
}

// Learned p: theta's gradient (dptheta) is one more tensor, within its bound; negated (the sign
// of dL/dp flipped) it fails, and only it.
TEST_CASE("learned p (-pl 1): dptheta compared too, and a negated one fails") {
    Result r = run(std::string(TOOL) + TINY + " -pl 1");
    INFO(r.output);
    CHECK(r.code == 0);
    CHECK(r.output.find("p learned per layer and head from 3") != std::string::npos);
    CHECK(count(r.output, "\ngradient ") == 16);
    CHECK(r.output.find("\ngradient   dptheta ") != std::string::npos);
    CHECK(r.output.find("passed: 36 of 36 tensors") != std::string::npos);
    Result neg = run(std::string(TOOL) + TINY + " -pl 1 -scale ptheta=-1");
    INFO(neg.output);
    CHECK(neg.code == 1);
    CHECK(count(neg.output, "FAILED") == 2);
    size_t line = neg.output.find("\ngradient   dptheta ");
    REQUIRE(line != std::string::npos);
    CHECK(neg.output.substr(line, neg.output.find('\n', line + 1) - line).find("FAILED") != std::string::npos);
    r = run(std::string(TOOL) + " -e d2c64h2v97 -t 32 -pl 1 -p 1");
    CHECK(r.code == 1);
    CHECK(r.output.find("-pl 1 with -p 1") != std::string::npos);
}

TEST_CASE("bad flags name the flag, the value and the fix") {
    Result r = run(std::string(TOOL) + " -e x12");
    CHECK(r.code == 1);
    CHECK(r.output.find("-e x12: not a model descriptor") != std::string::npos);
    r = run(std::string(TOOL) + TINY + " -scale nosuch=2");
    CHECK(r.code == 1);
    CHECK(r.output.find("-scale nosuch: no such parameter tensor (wte, ln1w") != std::string::npos);
    r = run(std::string(TOOL) + " -e d2c60h2");
    CHECK(r.code == 1);
    CHECK(r.output.find("-e d2c60h2: ") != std::string::npos);
    r = run(std::string(TOOL) + " -f 16");
    CHECK(r.code == 1);
    CHECK(r.output.find("-f 16: expected 64 or 32") != std::string::npos);
}
