/* The kernel test's workload: one thread on CPU in tandem_hot_loop, one
 * blocking in tandem_block_wait (a nanosleep, then a read on a pipe), and
 * one feeding that pipe (tandem_pipe_feed). Built static and non-PIE, so
 * the guest needs nothing else. Runs until killed. */
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

static int pipefd[2];
static volatile uint64_t sink;

static void nap(long ms) {
	struct timespec ts = {0, ms * 1000000L};
	nanosleep(&ts, NULL);
}

__attribute__((noinline)) void tandem_hot_loop(void) {
	uint64_t x = 88172645463325252ULL;
	for (;;) {
		for (int i = 0; i < 1000000; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
		}
		sink = x;
	}
}

__attribute__((noinline)) void tandem_block_wait(void) {
	char c;
	for (;;) {
		nap(10);
		if (read(pipefd[0], &c, 1) != 1)
			return;
		__asm__ volatile("" ::: "memory");
	}
}

__attribute__((noinline)) void tandem_pipe_feed(void) {
	for (;;) {
		nap(20);
		if (write(pipefd[1], "x", 1) != 1)
			return;
		__asm__ volatile("" ::: "memory");
	}
}

static void *hot(void *arg) { (void)arg; tandem_hot_loop(); return NULL; }
static void *blocker(void *arg) { (void)arg; tandem_block_wait(); return NULL; }
static void *feeder(void *arg) { (void)arg; tandem_pipe_feed(); return NULL; }

int main(void) {
	pthread_t t[3];
	if (pipe(pipefd) != 0)
		return 1;
	pthread_create(&t[0], NULL, hot, NULL);
	pthread_create(&t[1], NULL, blocker, NULL);
	pthread_create(&t[2], NULL, feeder, NULL);
	pthread_join(t[0], NULL);
	return 0;
}
