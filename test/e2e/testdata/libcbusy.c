/* A workload that spends its time inside libc's internal functions: qsort
 * (merge sort, msort_with_tmp) and malloc/free of many sizes past the
 * tcache (_int_malloc, _int_free, malloc_consolidate). None of those is in
 * libc's .dynsym; only libc's debug file (libc6-dbg) names them. Runs for
 * argv[1] seconds. */
#include <stdlib.h>
#include <time.h>

static int cmp(const void *a, const void *b) {
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv) {
	time_t end = time(NULL) + (argc > 1 ? atol(argv[1]) : 5);
	enum { N = 20000, BLOCKS = 512 };
	static int v[N];
	static void *blocks[BLOCKS];
	unsigned seed = 1;
	long sum = 0;
	while (time(NULL) < end) {
		for (int i = 0; i < N; i++)
			v[i] = (int)rand_r(&seed);
		qsort(v, N, sizeof v[0], cmp);
		for (int i = 0; i < BLOCKS; i++)
			blocks[i] = malloc(16 + rand_r(&seed) % 8192);
		for (int i = 0; i < BLOCKS; i += 2)
			free(blocks[i]);
		for (int i = 1; i < BLOCKS; i += 2)
			free(blocks[i]);
		sum += v[N / 2];
	}
	return sum == 42;
}
