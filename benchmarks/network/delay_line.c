// delay_line: a fixed one-way delay on a link, for a kernel without netem.
//
//   delay_line [--rt] DELAY_US NETNS_IN IFACE_IN NETNS_OUT IFACE_OUT
//
// Creates TAP device IFACE_IN inside network namespace NETNS_IN (a path such as
// /var/run/netns/x) and TAP IFACE_OUT inside NETNS_OUT, then writes every Ethernet frame that
// the kernel sends into IFACE_IN out of IFACE_OUT (so it is received there), DELAY_US
// microseconds after it was read. The caller steers a host's egress traffic into IFACE_IN
// (tc mirred) and makes IFACE_OUT a bridge port: this is netem's "delay on egress" done in
// user space. One direction only: the way back is the other host's own delay line.
//
// The loop: read frames as they come, stamp each with its due time and append it to a FIFO;
// sleep in ppoll until the input is readable or the oldest frame is due; write what is due.
// The delay is the same for every frame, so FIFO order is due-time order.
//
// The TAPs carry a virtio-net header (IFF_VNET_HDR) and announce checksum and TSO offload, so
// TCP hands us segments of up to 64 KiB with the checksum left to do; header and frame pass
// through untouched and the receiving stack treats them like a NIC's GRO output. That keeps the
// frame rate (and our syscall count) low enough for Gbit/s rates on a small machine.
//
// Limits: the line adds no bandwidth limit of its own (shape with tc tbf on IFACE_IN); it is a
// user-space copy, so its throughput is what one thread can read and write, and scheduling
// delays on a busy machine add to the delay, never subtract. Over QUEUE_CAP bytes in flight
// the newest frame is dropped, like a full switch buffer. Both TAPs disappear when the
// program exits (they are not persistent). SIGTERM/SIGINT print frame and drop counts.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

enum {
  MAX_FRAME = 65536 + 64,        // a TSO segment, its Ethernet and virtio-net headers
  QUEUE_CAP = 64 * 1024 * 1024,  // bytes in flight before tail drop
};

struct frame {
  struct frame* next;
  int64_t due_ns;
  ssize_t len;
  unsigned char data[];
};

struct line {
  const char* name;
  int in_fd;
  int out_fd;
  int64_t delay_ns;
  _Atomic uint64_t frames, bytes, drops;  // read at exit by the main thread
};

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char* what, const char* arg) {
  fprintf(stderr, "delay_line: %s %s: %s\n", what, arg ? arg : "", strerror(errno));
  exit(1);
}

// Creates TAP `iface` in the network namespace at `ns_path`; the fd keeps working wherever
// this process is, so we return to our own namespace afterwards.
static int open_tap(const char* ns_path, const char* iface) {
  int home = open("/proc/self/ns/net", O_RDONLY);
  int ns = open(ns_path, O_RDONLY);
  if (home < 0 || ns < 0) die("cannot open namespace", ns_path);
  if (setns(ns, CLONE_NEWNET) != 0) die("setns", ns_path);
  int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK);
  if (fd < 0) die("open", "/dev/net/tun");
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
  snprintf(ifr.ifr_name, IFNAMSIZ, "%s", iface);
  if (ioctl(fd, TUNSETIFF, &ifr) != 0) die("TUNSETIFF", iface);
  unsigned offload = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6;
  if (ioctl(fd, TUNSETOFFLOAD, offload) != 0) die("TUNSETOFFLOAD", iface);
  if (setns(home, CLONE_NEWNET) != 0) die("setns back from", ns_path);
  close(ns);
  close(home);
  return fd;
}

static void* forward(void* arg) {
  struct line* d = arg;
  struct frame *head = NULL, *tail = NULL;
  size_t queued = 0;
  struct frame* spare = NULL;     // read into a full-size frame, shrink it once the size is known
  prctl(PR_SET_TIMERSLACK, 1UL);  // the default 50 us slack would swamp a LAN delay
  struct pollfd pfd = {.fd = d->in_fd, .events = POLLIN};
  for (;;) {
    // Deliver what is due. A device that is down (EIO) or full loses the frame, as a cable
    // would.
    int64_t now = now_ns();
    while (head && head->due_ns <= now) {
      if (write(d->out_fd, head->data, head->len) < 0) {
        if (errno != EIO && errno != EAGAIN && errno != ENOBUFS) die("write", d->name);
        d->drops++;
      }
      struct frame* f = head;
      head = f->next;
      if (!head) tail = NULL;
      queued -= f->len;
      free(f);
    }
    // Sleep until a frame arrives or the oldest one is due.
    struct timespec ts, *timeout = NULL;
    if (head) {
      int64_t wait = head->due_ns - now;
      ts.tv_sec = wait / 1000000000LL;
      ts.tv_nsec = wait % 1000000000LL;
      timeout = &ts;
    }
    if (ppoll(&pfd, 1, timeout, NULL) < 0 && errno != EINTR) die("ppoll", d->name);
    if (!(pfd.revents & POLLIN)) continue;
    // Take everything that is waiting; all of it is stamped with this read's time.
    const int64_t due = now_ns() + d->delay_ns;
    for (;;) {
      if (!spare && !(spare = malloc(sizeof *spare + MAX_FRAME))) die("malloc", d->name);
      ssize_t n = read(d->in_fd, spare->data, MAX_FRAME);
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) break;
        die("read", d->name);
      }
      if (queued + n > QUEUE_CAP) {
        d->drops++;
        continue;
      }
      struct frame* f = realloc(spare, sizeof *f + n);
      spare = NULL;
      if (!f) die("realloc", d->name);
      f->len = n;
      f->due_ns = due;
      f->next = NULL;
      if (tail) tail->next = f;
      else head = f;
      tail = f;
      queued += n;
      d->frames++;
      d->bytes += n;
    }
  }
  return NULL;
}

int main(int argc, char** argv) {
  const int rt = argc > 1 && strcmp(argv[1], "--rt") == 0;
  if (argc != 6 + rt) {
    fprintf(stderr, "usage: delay_line [--rt] DELAY_US NETNS_IN IFACE_IN NETNS_OUT IFACE_OUT\n");
    return 2;
  }
  char** a = argv + 1 + rt;
  char* end;
  const double delay_us = strtod(a[0], &end);
  if (*end || delay_us < 0) {
    fprintf(stderr, "delay_line: DELAY_US must be a number >= 0, got '%s'\n", a[0]);
    return 2;
  }
  static struct line line;
  line.name = a[2];
  line.in_fd = open_tap(a[1], a[2]);
  line.out_fd = open_tap(a[3], a[4]);
  line.delay_ns = (int64_t)(delay_us * 1000.0);
  if (rt) {
    // The wire should not wait behind the ranks' computation: a modest real-time priority
    // (the kernel's RT throttling still leaves the CPU to others 5% of every second).
    struct sched_param sp = {.sched_priority = 10};
    if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0) die("sched_setscheduler", "SCHED_FIFO");
  }
  // The forwarder never sees SIGTERM/SIGINT; the main thread waits for one and reports.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, NULL);
  pthread_t thread;
  if (pthread_create(&thread, NULL, forward, &line) != 0) die("pthread_create", a[2]);
  // Tell the caller the devices exist (it configures them next), then serve until stopped.
  printf("ready %s %s\n", a[2], a[4]);
  fflush(stdout);
  int sig;
  sigwait(&stop, &sig);
  fprintf(stderr, "delay_line %s->%s: %llu frames, %llu bytes, %llu dropped\n", a[2], a[4],
          (unsigned long long)line.frames, (unsigned long long)line.bytes,
          (unsigned long long)line.drops);
  return 0;
}
