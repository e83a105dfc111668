/*
 * portico-sandbox-bpf: attaches the socket rules of one deployment to its cgroup (v2 hierarchy).
 *
 *   portico-sandbox-bpf <cgroup-v2-dir> < programs
 *
 * stdin holds records, each: u32 hook (1 sock_create, 2 bind4, 3 bind6, 4 connect4, 5 connect6),
 * u32 instruction count, then that many 8-byte eBPF instructions (host byte order). The programs
 * are generated and reviewed in SocketPolicy.ts; this helper only loads them and attaches them
 * to the cgroup, where the kernel runs them for every socket call of every task inside it. A
 * program answering 0 makes the call fail with EPERM. The attachment outlives this process and
 * goes away with the cgroup. Runs as root (CAP_BPF, CAP_NET_ADMIN), does nothing else, and exits
 * non-zero with the verifier's log on any failure so the launch stops before the app starts.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_INSNS 4096

static int read_full(void *buf, size_t len) {
  size_t got = 0;
  while (got < len) {
    ssize_t n = read(0, (char *)buf + got, len - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return got == 0 ? 0 : -1; /* 0: clean end between records */
    got += (size_t)n;
  }
  return 1;
}

int main(int argc, char **argv) {
  static struct bpf_insn insns[MAX_INSNS];
  static char log[65536];
  if (argc != 2) { fprintf(stderr, "usage: %s <cgroup-v2-dir> < programs\n", argv[0]); return 2; }
  int cg = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (cg < 0) { perror(argv[1]); return 1; }
  for (;;) {
    uint32_t head[2];
    int r = read_full(head, sizeof head);
    if (r == 0) break;
    if (r < 0 || head[1] == 0 || head[1] > MAX_INSNS) { fprintf(stderr, "bad record header\n"); return 1; }
    if (read_full(insns, head[1] * sizeof(struct bpf_insn)) != 1) { fprintf(stderr, "short program\n"); return 1; }
    uint32_t prog_type, attach_type;
    switch (head[0]) {
      case 1: prog_type = BPF_PROG_TYPE_CGROUP_SOCK; attach_type = BPF_CGROUP_INET_SOCK_CREATE; break;
      case 2: prog_type = BPF_PROG_TYPE_CGROUP_SOCK_ADDR; attach_type = BPF_CGROUP_INET4_BIND; break;
      case 3: prog_type = BPF_PROG_TYPE_CGROUP_SOCK_ADDR; attach_type = BPF_CGROUP_INET6_BIND; break;
      case 4: prog_type = BPF_PROG_TYPE_CGROUP_SOCK_ADDR; attach_type = BPF_CGROUP_INET4_CONNECT; break;
      case 5: prog_type = BPF_PROG_TYPE_CGROUP_SOCK_ADDR; attach_type = BPF_CGROUP_INET6_CONNECT; break;
      default: fprintf(stderr, "unknown hook %u\n", head[0]); return 1;
    }
    union bpf_attr load;
    memset(&load, 0, sizeof load);
    load.prog_type = prog_type;
    load.expected_attach_type = attach_type;
    load.insns = (uint64_t)(uintptr_t)insns;
    load.insn_cnt = head[1];
    load.license = (uint64_t)(uintptr_t)"GPL";
    load.log_buf = (uint64_t)(uintptr_t)log;
    load.log_size = sizeof log;
    load.log_level = 1;
    log[0] = 0;
    int prog = (int)syscall(SYS_bpf, BPF_PROG_LOAD, &load, sizeof load);
    if (prog < 0) { fprintf(stderr, "hook %u: BPF_PROG_LOAD: %s\n%s\n", head[0], strerror(errno), log); return 1; }
    union bpf_attr attach;
    memset(&attach, 0, sizeof attach);
    attach.target_fd = (uint32_t)cg;
    attach.attach_bpf_fd = (uint32_t)prog;
    attach.attach_type = attach_type;
    if (syscall(SYS_bpf, BPF_PROG_ATTACH, &attach, sizeof attach) < 0) {
      fprintf(stderr, "hook %u: BPF_PROG_ATTACH to %s: %s\n", head[0], argv[1], strerror(errno));
      return 1;
    }
    close(prog);
  }
  return 0;
}
