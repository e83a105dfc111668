/*
 * portico-sandbox-exec: the last step before a deployed app's own code, inside its sandbox, after
 * setpriv has dropped to the app's uid with no capabilities and no_new_privs.
 *
 *   portico-sandbox-exec <env-file> -- <argv...>
 *
 * 1. Reads the app's environment from <env-file>: `NAME=value` entries each ended by NUL (the
 *    form DeploymentEnv.renderEnvironment writes). The tenant's environment reaches nothing else:
 *    the launcher chain above this (sh, bwrap, setpriv, all root) runs with a fixed environment,
 *    so a tenant's LD_PRELOAD or similar is never read by a privileged process.
 * 2. umask 077: the app's files are its own.
 * 3. Landlock (ABI 6 or later; refused to run on less): abstract Unix sockets and signals are
 *    scoped to the app's own processes (a host daemon's `\0name` socket cannot be reached).
 *    Binds are left to the cgroup hooks (SocketPolicy.ts), whose refusal is the spec's EPERM
 *    (Landlock's would be EACCES).
 * 4. seccomp: calls that widen the kernel surface fail with EPERM: namespaces (unshare, setns,
 *    clone with a CLONE_NEW* flag), mounts, chroot and pivot_root, the key store, bpf,
 *    perf_event_open, io_uring, module and kexec loading, and sockets of families other than
 *    Unix, IPv4, IPv6 and netlink. clone3 answers ENOSYS (its flags are in memory a filter cannot
 *    read), so libc falls back to clone, whose flags it can.
 * 5. The listen guard. listen() on a TCP socket that was never bound picks an ephemeral port
 *    itself, and neither the cgroup bind hooks nor Landlock see that port: an app could serve on a
 *    port other than PORT. (A BPF LSM program could refuse it in the kernel, but this kernel's
 *    lockdown refuses to load LSM programs.) So every listen() of the app is a seccomp user
 *    notification answered by this process, which stays as the app's parent: it takes a copy of
 *    the socket (pidfd_getfd), refuses with EPERM when its local port is 0, and otherwise makes
 *    the listen() call itself on that same socket and answers its result. Acting on the copy it
 *    checked leaves no window for the app to swap the descriptor between check and call. If this
 *    process is gone, every listen() of the app fails (ENOSYS): the guard fails closed.
 * 6. execvp of the app's argv with that environment, in a child; this process waits for it and
 *    ends the same way it does (exit code, or the same signal).
 *
 * Any failure exits 126 with a line on stderr before the app runs: a sandbox that cannot be put
 * in place is not run without it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Landlock's ABI, spelled out: the build host's headers may predate ABI 6. */
#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LL_SCOPE_SIGNAL (1ULL << 1)
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif
struct ll_ruleset_attr { uint64_t handled_access_fs, handled_access_net, scoped; };

#define ENV_MAX_BYTES (256 * 1024)
#define ENV_MAX_ENTRIES 4096

static void fail(const char *what) {
  fprintf(stderr, "portico-sandbox-exec: %s: %s\n", what, errno ? strerror(errno) : "refused");
  exit(126);
}

static char **read_environment(const char *file) {
  static char buf[ENV_MAX_BYTES + 1];
  static char *entries[ENV_MAX_ENTRIES + 1];
  int fd = open(file, O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("open the environment file");
  size_t got = 0;
  for (;;) {
    ssize_t n = read(fd, buf + got, sizeof buf - 1 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("read the environment file");
    if (n == 0) break;
    got += (size_t)n;
    if (got >= sizeof buf - 1) { errno = 0; fail("environment file too large"); }
  }
  close(fd);
  size_t count = 0;
  for (size_t at = 0; at < got;) {
    size_t len = strnlen(buf + at, got - at);
    if (at + len >= got) { errno = 0; fail("environment entry without its NUL"); }
    if (len > 0 && strchr(buf + at, '=') != NULL) {
      if (count == ENV_MAX_ENTRIES) { errno = 0; fail("too many environment entries"); }
      entries[count++] = buf + at;
    }
    at += len + 1;
  }
  entries[count] = NULL;
  return entries;
}

static void landlock(void) {
  long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
  if (abi < 6) { errno = abi < 0 ? errno : 0; fail("Landlock ABI 6 or later is needed (abstract socket scoping)"); }
  struct ll_ruleset_attr attr = { .scoped = LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL };
  int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
  if (ruleset < 0) fail("landlock_create_ruleset");
  if (syscall(SYS_landlock_restrict_self, ruleset, 0) < 0) fail("landlock_restrict_self");
  close(ruleset);
}

#if defined(__x86_64__)
#define AUDIT_ARCH_SELF AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define AUDIT_ARCH_SELF AUDIT_ARCH_AARCH64
#else
#error "portico-sandbox-exec: unsupported architecture"
#endif

/* Calls refused with EPERM whatever their arguments. */
static const long denied[] = {
  SYS_unshare, SYS_setns, SYS_mount, SYS_umount2, SYS_pivot_root, SYS_chroot,
  SYS_keyctl, SYS_add_key, SYS_request_key, SYS_bpf, SYS_perf_event_open,
  SYS_io_uring_setup, SYS_io_uring_enter, SYS_io_uring_register,
  SYS_init_module, SYS_finit_module, SYS_delete_module, SYS_kexec_load, SYS_kexec_file_load,
  SYS_open_by_handle_at, SYS_name_to_handle_at, SYS_userfaultfd, SYS_acct, SYS_quotactl,
  SYS_swapon, SYS_swapoff, SYS_reboot, SYS_syslog, SYS_settimeofday, SYS_clock_settime,
  SYS_fsopen, SYS_fsconfig, SYS_fsmount, SYS_fspick, SYS_move_mount, SYS_open_tree, SYS_mount_setattr,
#ifdef SYS_umount
  SYS_umount,
#endif
};

#define CLONE_NEW_ANY (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP | 0x80 /* CLONE_NEWTIME */)

static void seccomp_filter(void) {
  enum { N = sizeof denied / sizeof denied[0] };
  struct sock_filter f[N + 32];
  unsigned n = 0;
#define EMIT(x) (f[n++] = (struct sock_filter)x)
#define LOAD(field) EMIT(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, field)))
#define RETURN(value) EMIT(BPF_STMT(BPF_RET | BPF_K, value))
  /* Jump offsets count instructions from the one after the jump. */
  LOAD(arch);
  EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_SELF, 1, 0));
  RETURN(SECCOMP_RET_KILL_PROCESS);
  LOAD(nr);
#if defined(__x86_64__)
  /* the x32 ABI's numbers reach the same calls under other numbers */
  EMIT(BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1));
  RETURN(SECCOMP_RET_ERRNO | EPERM);
#endif
  /* each denied number jumps to the EPERM return right after the list */
  for (unsigned i = 0; i < N; i++) EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)denied[i], (uint8_t)(N - i), 0));
  EMIT(BPF_JUMP(BPF_JMP | BPF_JA, 1, 0, 0));
  RETURN(SECCOMP_RET_ERRNO | EPERM);
  /* clone3: ENOSYS, so libc uses clone */
  EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1));
  RETURN(SECCOMP_RET_ERRNO | ENOSYS);
  /* clone: no CLONE_NEW* flag */
  EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 3));
  LOAD(args[0]);
  EMIT(BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_NEW_ANY, 0, 1));
  RETURN(SECCOMP_RET_ERRNO | EPERM);
  /* socket: Unix, IPv4, IPv6 and netlink only */
  LOAD(nr);
  EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 0, 7));
  LOAD(args[0]);
  EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 3, 0));
  EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET, 2, 0));
  EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET6, 1, 0));
  EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_NETLINK, 0, 1));
  RETURN(SECCOMP_RET_ALLOW);
  RETURN(SECCOMP_RET_ERRNO | EAFNOSUPPORT);
  RETURN(SECCOMP_RET_ALLOW);
#undef RETURN
#undef LOAD
#undef EMIT
  struct sock_fprog prog = { .len = (unsigned short)n, .filter = f };
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("no_new_privs");
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0) fail("seccomp");
}

/* --- the listen guard ------------------------------------------------------------------------ */

/* In the child, after fork: every listen() becomes a notification on the returned descriptor. */
static int listen_notifications(void) {
  struct sock_filter f[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_listen, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = { .len = sizeof f / sizeof f[0], .filter = f };
  int fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
  if (fd < 0) fail("seccomp listen notifications");
  return fd;
}

static void send_fd(int channel, int fd) {
  char byte = 0, control[CMSG_SPACE(sizeof(int))];
  struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control };
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof fd);
  if (sendmsg(channel, &msg, 0) != 1) fail("pass the listen notifications");
}

static int receive_fd(int channel) {
  char byte, control[CMSG_SPACE(sizeof(int))];
  struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control };
  if (recvmsg(channel, &msg, MSG_CMSG_CLOEXEC) != 1) return -1;
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  if (c == NULL || c->cmsg_type != SCM_RIGHTS) return -1;
  int fd;
  memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return fd;
}

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif

/* A descriptor of the task `tid` (a thread's own pidfd where the kernel has them). */
static int task_fd(pid_t tid) {
  int fd = (int)syscall(SYS_pidfd_open, tid, PIDFD_THREAD);
  return fd >= 0 ? fd : (int)syscall(SYS_pidfd_open, tid, 0);
}

/* The answer to one listen(fd, backlog) of the app: 0, or a negative errno. */
static int guarded_listen(pid_t tid, int fd, int backlog, int notifications, uint64_t id) {
  int task = task_fd(tid);
  if (task < 0) return -ESRCH;
  int sock = (int)syscall(SYS_pidfd_getfd, task, fd, 0);
  int saved = errno;
  close(task);
  if (sock < 0) return saved == EBADF ? -EBADF : -ENOTSOCK;
  /* the caller is still waiting on this very call (not a reused pid) */
  if (ioctl(notifications, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) != 0) { close(sock); return -ESRCH; }
  struct sockaddr_storage local;
  socklen_t len = sizeof local;
  int answer = 0;
  if (getsockname(sock, (struct sockaddr *)&local, &len) != 0) answer = -errno;
  else if (local.ss_family == AF_INET && ((struct sockaddr_in *)&local)->sin_port == 0) answer = -EPERM;
  else if (local.ss_family == AF_INET6 && ((struct sockaddr_in6 *)&local)->sin6_port == 0) answer = -EPERM;
  else if (listen(sock, backlog) != 0) answer = -errno;
  close(sock);
  return answer;
}

static void end_like(int status) {
  if (WIFEXITED(status)) exit(WEXITSTATUS(status));
  int sig = WIFSIGNALED(status) ? WTERMSIG(status) : SIGKILL;
  signal(sig, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  sigprocmask(SIG_UNBLOCK, &set, NULL);
  kill(getpid(), sig);
  exit(128 + sig);
}

static void supervise(pid_t app, int notifications) {
  /* The app's own stop signals are for the app: this process ends when it does. */
  signal(SIGTERM, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  int child = (int)syscall(SYS_pidfd_open, app, 0);
  if (child < 0) fail("pidfd_open");
  struct seccomp_notif_sizes sizes;
  if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) != 0) fail("seccomp notification sizes");
  struct seccomp_notif *req = calloc(1, sizes.seccomp_notif > sizeof *req ? sizes.seccomp_notif : sizeof *req);
  struct seccomp_notif_resp *resp = calloc(1, sizes.seccomp_notif_resp > sizeof *resp ? sizes.seccomp_notif_resp : sizeof *resp);
  if (req == NULL || resp == NULL) fail("memory");
  for (;;) {
    /* once the app and its children are all gone the notifications end (POLLHUP): then only
     * the app's exit is left to wait for */
    struct pollfd fds[2] = { { .fd = child, .events = POLLIN }, { .fd = notifications, .events = POLLIN } };
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      fail("poll");
    }
    if (fds[0].revents) {
      int status;
      if (waitpid(app, &status, 0) == app) end_like(status);
    }
    if (fds[1].revents & POLLIN) {
      memset(req, 0, sizes.seccomp_notif);
      if (ioctl(notifications, SECCOMP_IOCTL_NOTIF_RECV, req) != 0) continue; /* gone meanwhile */
      memset(resp, 0, sizes.seccomp_notif_resp);
      resp->id = req->id;
      resp->error = req->data.nr == SYS_listen
        ? guarded_listen((pid_t)req->pid, (int)req->data.args[0], (int)req->data.args[1], notifications, req->id)
        : -ENOSYS;
      ioctl(notifications, SECCOMP_IOCTL_NOTIF_SEND, resp); /* fails only if the caller is gone */
    } else if (fds[1].revents) {
      notifications = -1;
    }
  }
}

int main(int argc, char **argv) {
  if (argc < 4 || strcmp(argv[2], "--") != 0) {
    fprintf(stderr, "usage: %s <env-file> -- <argv...>\n", argv[0]);
    return 126;
  }
  char **env = read_environment(argv[1]);
  umask(077);
  landlock();
  seccomp_filter();
  int channel[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, channel) != 0) fail("socketpair");
  pid_t app = fork();
  if (app < 0) fail("fork");
  if (app == 0) {
    close(channel[0]);
    int notifications = listen_notifications();
    send_fd(channel[1], notifications);
    close(notifications);
    close(channel[1]);
    environ = env;
    execvp(argv[3], argv + 3);
    fail(argv[3]);
  }
  close(channel[1]);
  int notifications = receive_fd(channel[0]);
  close(channel[0]);
  if (notifications < 0) {
    kill(app, SIGKILL);
    errno = 0;
    fail("no listen notifications from the app's process");
  }
  supervise(app, notifications);
  return 126;
}
