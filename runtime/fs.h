// File-system helpers of the runtime.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include <sys/stat.h>

// mkdir -p: creates dir and its missing parents; "" on success, else what failed and why.
inline std::string make_dirs(const std::string& dir) {
    for (size_t i = 1; i <= dir.size(); i++) {
        if (i < dir.size() && dir[i] != '/') continue;
        std::string prefix = dir.substr(0, i);
        if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
            return "cannot create " + prefix + " (" + strerror(errno) + ")";
    }
    return "";
}

inline bool path_exists(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}
