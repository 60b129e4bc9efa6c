"""A census-shaped synthetic data set for mxnet's example/sparse/wide_deep, which downloads
UCI's Adult (``adult.data`` / ``adult.test``) where this machine has no internet.

The files are Adult's CSV format without a header, 15 columns: age, workclass, fnlwgt,
education, education_num, marital_status, occupation, relationship, race, gender,
capital_gain, capital_loss, hours_per_week, native_country, income_bracket. Every
categorical value is one the example's vocabularies know (its indicator columns must
find theirs). How the rows are made (all from one ``numpy.random.RandomState(seed)``):

* categorical columns drawn uniformly from their value lists; ``education_num`` is
  the education's rank; age 17-80, hours 10-80, capital gain / loss mostly 0;
* the label is ``>50K`` with the sigmoid of a hidden score: more education, age near
  45, more hours, a married-civ-spouse status, some occupations and a capital gain
  raise it; about a quarter of the rows end up ``>50K``, as in Adult.

The test file's labels end with a period (``>50K.``), as Adult's do.

    python examples/adult_synth.py OUT_DIR [--train 6000 --test 1500]
"""
from __future__ import annotations

import argparse
import os

import numpy as np

WORKCLASS = ["Self-emp-not-inc", "Private", "State-gov", "Federal-gov", "Local-gov", "?",
             "Self-emp-inc", "Without-pay", "Never-worked"]
EDUCATION = ["Preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th",
             "HS-grad", "Some-college", "Assoc-voc", "Assoc-acdm", "Bachelors", "Masters",
             "Prof-school", "Doctorate"]           # in education_num order
MARITAL = ["Married-civ-spouse", "Divorced", "Married-spouse-absent", "Never-married",
           "Separated", "Married-AF-spouse", "Widowed"]
OCCUPATION = ["Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial",
              "Prof-specialty", "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical",
              "Farming-fishing", "Transport-moving", "Priv-house-serv", "Protective-serv",
              "Armed-Forces"]
RELATIONSHIP = ["Husband", "Not-in-family", "Wife", "Own-child", "Unmarried",
                "Other-relative"]
RACE = ["White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"]
GENDER = ["Female", "Male"]
COUNTRY = ["United-States", "Mexico", "Philippines", "Germany", "Canada", "India",
           "England", "Cuba", "China", "Italy", "Japan", "Poland", "Vietnam", "France"]
HIGH_PAY = {"Exec-managerial", "Prof-specialty", "Tech-support", "Sales"}


def _rows(rng, count, label_suffix):
    pick = lambda values: [values[i] for i in rng.randint(0, len(values), count)]  # noqa: E731
    edu = rng.randint(0, len(EDUCATION), count)
    age = rng.randint(17, 81, count)
    hours = rng.randint(10, 81, count)
    gain = np.where(rng.uniform(size=count) < 0.08, rng.randint(1000, 20000, count), 0)
    loss = np.where(rng.uniform(size=count) < 0.05, rng.randint(200, 3000, count), 0)
    marital, occupation = pick(MARITAL), pick(OCCUPATION)
    score = (0.35 * (edu - 9) - 0.002 * (age - 45) ** 2 + 0.03 * (hours - 40) +
             1.2 * np.array([m == "Married-civ-spouse" for m in marital]) +
             0.8 * np.array([o in HIGH_PAY for o in occupation]) + 1.5 * (gain > 5000) - 1.3)
    rich = rng.uniform(size=count) < 1 / (1 + np.exp(-score))
    columns = [age, pick(WORKCLASS), rng.randint(20000, 500000, count),
               [EDUCATION[e] for e in edu], edu + 1, marital, occupation,
               pick(RELATIONSHIP), pick(RACE), pick(GENDER), gain, loss, hours,
               pick(COUNTRY), [(">50K" if r else "<=50K") + label_suffix for r in rich]]
    return [", ".join(str(c[i]) for c in columns) + "\n" for i in range(count)]


def make(out_dir, train=6000, test=1500, seed=11):
    """Write ``adult.data`` and ``adult.test`` into ``out_dir`` (created)."""
    rng = np.random.RandomState(seed)
    os.makedirs(out_dir, exist_ok=True)
    for name, count, suffix in (("adult.data", train, ""), ("adult.test", test, ".")):
        with open(os.path.join(out_dir, name), "w") as f:
            f.writelines(_rows(rng, count, suffix))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--train", type=int, default=6000)
    p.add_argument("--test", type=int, default=1500)
    p.add_argument("--seed", type=int, default=11)
    args = p.parse_args(argv)
    make(args.out_dir, args.train, args.test, seed=args.seed)


if __name__ == "__main__":
    main()
