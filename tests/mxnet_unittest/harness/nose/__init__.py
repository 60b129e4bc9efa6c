"""The two ``nose.tools`` helpers mxnet 1.9.1's ``tests/python/unittest/common.py``
imports. nose itself is unmaintained and does not import on Python 3.12+."""
