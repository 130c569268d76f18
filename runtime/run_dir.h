// A training run's output directory (-o): one run owns it, one trainer uses it at a time.
//   lock:      an advisory lock (flock) on <dir>/trainer.lock, held for the process's life. The
//              kernel drops it when the process ends, however it ends, so a killed trainer's lock
//              never blocks; a second trainer is refused with the holder's pid.
//   ownership: a checkpoint belongs to the run of its config and identity (seed, training data:
//              RunIdentity, runtime/checkpoint.h). A new run refuses a directory that holds
//              checkpoints (the flag -ow 1 removes them and starts over deliberately); -y 1 resumes
//              only its own run's.
//   orphans:   optimizer shards whose model file is gone (a kill between removing an old model
//              file and its shards, or between writing a shard and its model file) are removed on
//              start, if they are this run's; so are the temp files of interrupted writes.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <stdexcept>
#include <string>
#include <sys/file.h>
#include <unistd.h>
#include <vector>

#include "runtime/checkpoint.h"
#include "runtime/fs.h"

// The training data's fingerprint: every shard's file name (without its folder, so the data may
// move) and token count, in glob order. Never 0.
inline uint64_t run_data_fingerprint(const std::vector<std::string>& files, const std::vector<int64_t>& tokens) {
    uint64_t h = checkpoint_checksum("run data", 8);
    for (size_t i = 0; i < files.size(); i++) {
        std::string name = files[i].substr(files[i].rfind('/') + 1);
        h = checkpoint_checksum(name.data(), name.size(), h);
        h = checkpoint_checksum(&tokens[i], sizeof(int64_t), h);
    }
    return h == 0 ? 1 : h;
}

// Takes the lock of dir for this process's life (the descriptor stays open; *fd_out, if given,
// receives it). "" on success, else why not: another process holds it (its pid named) or the file
// cannot be created.
inline std::string run_dir_lock(const std::string& dir, int* fd_out = nullptr) {
    std::string path = dir + "/trainer.lock";
    int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return "cannot create the lock file " + path + " (" + strerror(errno) + ")";
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        char pid[32] = {0};
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        close(fd);
        if (err != EWOULDBLOCK) return "cannot lock " + path + " (" + strerror(err) + ")";
        std::string holder = n > 0 ? std::string(pid, strcspn(pid, "\n")) : "unknown";
        return "another trainer (pid " + holder + ") is using this output dir (it holds " + path +
               "); wait for it to end, or give another -o";
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, len, 0) != len)
        fprintf(stderr, "warning: cannot write the pid into %s (%s)\n", path.c_str(), strerror(errno));
    if (fd_out) *fd_out = fd;
    return "";  // fd stays open: the lock lasts as long as the process
}

// The names in dir that start with "ckpt_" (model files, shards, temp files), sorted.
inline std::vector<std::string> run_dir_checkpoint_files(const std::string& dir) {
    std::vector<std::string> names;
    if (DIR* d = opendir(dir.c_str())) {
        while (struct dirent* e = readdir(d))
            if (strncmp(e->d_name, "ckpt_", 5) == 0) names.push_back(e->d_name);
        closedir(d);
    }
    std::sort(names.begin(), names.end());
    return names;
}

// "" if a new run (not resuming) may start in dir, else the refusal: the checkpoints there, named,
// and the flags that resume them, start over (-ow 1) or go elsewhere.
inline std::string run_dir_new_run_error(const std::string& dir) {
    std::vector<int64_t> steps = checkpoint_steps(dir);
    if (steps.empty()) return "";
    std::string names;
    for (size_t i = 0; i < steps.size() && i < 4; i++) names += (i ? ", " : "") + checkpoint_path(dir, steps[i]);
    if (steps.size() > 4) names += ", ... (" + std::to_string(steps.size()) + " checkpoints)";
    return "-o " + dir + " holds checkpoints of a run (" + names +
           "): a new run does not write over them. Continue that run with -y 1 (the same config, seed and "
           "data), start over in this directory with -ow 1 (removes its checkpoints), or give another -o";
}

// Removes every checkpoint file of dir (model files, shards, temp files): -ow 1. Throws on failure.
inline void run_dir_remove_checkpoints(const std::string& dir) {
    for (const std::string& name : run_dir_checkpoint_files(dir)) {
        std::string path = dir + "/" + name;
        if (unlink(path.c_str()) != 0)
            throw std::runtime_error("-ow 1: cannot remove " + path + " (" + strerror(errno) + ")");
    }
}

// Removes this run's orphan optimizer shards (their model file is gone) and the temp files of
// interrupted writes; returns the paths removed. Shards of another run are left, with a warning.
inline std::vector<std::string> run_dir_remove_orphans(const std::string& dir, const RunIdentity& run) {
    std::vector<std::string> removed;
    for (const std::string& name : run_dir_checkpoint_files(dir)) {
        std::string path = dir + "/" + name;
        bool temp = name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0;
        long long step;
        int len = 0;
        bool shard = !temp && sscanf(name.c_str(), "ckpt_%8lld_adamw_%*dof%*d.bin%n", &step, &len) == 1 &&
                     len == (int)name.size();
        if (!temp && !(shard && !path_exists(checkpoint_path(dir, step)))) continue;
        if (shard) {
            RunIdentity of;
            try {
                OptimizerShardHeader h = optimizer_shard_read_header(path);
                of.seed = h.run_seed;
                of.data_fingerprint = h.data_fingerprint;
            } catch (const std::exception& e) {
                fprintf(stderr, "warning: leaving %s, which is not a readable shard (%s)\n", path.c_str(), e.what());
                continue;
            }
            if (!(of == run)) {
                fprintf(stderr, "warning: leaving the orphan optimizer shard %s of another run\n", path.c_str());
                continue;
            }
        }
        if (unlink(path.c_str()) == 0) removed.push_back(path);
        else fprintf(stderr, "warning: cannot remove %s (%s)\n", path.c_str(), strerror(errno));
    }
    return removed;
}
