"""A MovieLens-shaped synthetic ratings set for mxnet's example/sparse/matrix_factorization,
which downloads MovieLens 10M (``ml-10M100K``) where this machine has no internet.

The files are MovieLens's ``r1.train`` / ``r1.test`` format, one rating per line:
``user::movie::rating::timestamp``. How they are made (all from one
``numpy.random.RandomState(seed)``):

* ``users`` users and ``movies`` movies, each with a bias ``~ N(0, 0.5)`` and an
  8-dimensional taste vector ``~ N(0, 1)``; their ids are spread over the id ranges the
  example's tables cover (``user * 23 + 1`` below 71,569, ``movie * 31 + 1`` below
  65,135), so the embedding tables stay as large as the real data's and most rows are
  never read;
* a rating is ``3.5 + user bias + movie bias + 0.4 <taste_u, taste_m> + N(0, 0.3)``,
  rounded to half stars and clipped to ``[0.5, 5]``, as MovieLens's stars;
* each (user, movie) pair is drawn uniformly; train and test lines come from the same
  model, one after the other.

The model is learnable (the example's validation MSE falls), but not to 0.

    python examples/movielens_synth.py OUT_DIR [--train 20000 --test 4000]
"""
from __future__ import annotations

import argparse
import os

import numpy as np

FACTORS = 8
USER_STRIDE, MOVIE_STRIDE = 23, 31       # ids spread over the example's table sizes


def _lines(rng, model, count):
    bias_u, bias_m, taste_u, taste_m = model
    users = rng.randint(0, len(bias_u), count)
    movies = rng.randint(0, len(bias_m), count)
    raw = 3.5 + bias_u[users] + bias_m[movies] + \
        0.4 * (taste_u[users] * taste_m[movies]).sum(axis=1) + rng.normal(0, 0.3, count)
    stars = np.clip(np.round(raw * 2) / 2, 0.5, 5.0)
    return [f"{u * USER_STRIDE + 1}::{m * MOVIE_STRIDE + 1}::{s}::978300760\n"
            for u, m, s in zip(users, movies, stars)]


def make(out_dir, train=20000, test=4000, users=3000, movies=2000, seed=7):
    """Write ``r1.train`` and ``r1.test`` into ``out_dir`` (created)."""
    if (users - 1) * USER_STRIDE + 1 >= 71569 or (movies - 1) * MOVIE_STRIDE + 1 >= 65135:
        raise ValueError("too many users or movies for the example's table sizes")
    rng = np.random.RandomState(seed)
    model = (rng.normal(0, 0.5, users), rng.normal(0, 0.5, movies),
             rng.normal(0, 1, (users, FACTORS)), rng.normal(0, 1, (movies, FACTORS)))
    os.makedirs(out_dir, exist_ok=True)
    for name, count in (("r1.train", train), ("r1.test", test)):
        with open(os.path.join(out_dir, name), "w") as f:
            f.writelines(_lines(rng, model, count))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--train", type=int, default=20000)
    p.add_argument("--test", type=int, default=4000)
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args(argv)
    make(args.out_dir, args.train, args.test, seed=args.seed)


if __name__ == "__main__":
    main()
