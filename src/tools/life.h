/* kvtierfs-bench --life: a server's stream of requests (life.c). */
#ifndef KVT_LIFE_H
#define KVT_LIFE_H

#include <stdint.h>

#include "evict.h"

#define LIFE_MAX_BUDGETS 8

struct life_opts {
	uint64_t blocks;       /* stop once the stream made this many new blocks; 0: no limit */
	uint64_t capacity;     /* blocks kept, the least recently used evicted; 0: all */
	double duration;       /* stop after this many seconds; 0: no limit */
	unsigned families;     /* prompt families */
	double zipf;           /* their popularity: P(rank k) ~ 1 / k^zipf */
	uint64_t seed;
	unsigned threads;      /* loaders, and as many storers */
	double interval;       /* seconds between progress lines */
	int pid;               /* the daemon whose RSS and fds are sampled; 0: none */
	int json;              /* one JSON document instead of lines */
	uint64_t requests;     /* stop after this many requests; 0: no limit */
	unsigned scan_pct;     /* requests that are a one-off long document */
	uint64_t lru_blocks;   /* the run's hits against an exact LRU of this many blocks; 0: none */
	/* --simulate: the stream through the eviction policies, no files */
	unsigned seeds;        /* seeds played: seed, seed + 1, ... */
	uint64_t block_size;
	unsigned budgets[LIFE_MAX_BUDGETS];  /* budget n: 1/n of the blocks stored */
	unsigned n_budgets;
	struct kvt_evict_tuning tuning;
};

/* Runs the stream against the directory of bio_setup(); returns the
 * number of errors (wrong bytes included). */
uint64_t life_run(const struct life_opts *o);

/* Plays the stream with no file system through an exact LRU and S3-FIFO
 * at budgets of 1/n of the blocks it stores (budgets), without and with
 * the one-off documents of scan_pct, and prints their hit rates. */
void life_simulate(const struct life_opts *o);

#endif
