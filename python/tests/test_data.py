"""autopar.data, the twin of the runtime's shuffle order: the same golden
values as unittests/Runtime/DataLoaderTest.cpp (epochPermutation in
runtime/lib/DataLoader.cpp), so that the two definitions stay in step."""
import unittest

from autopar import data


class SplitMix64Test(unittest.TestCase):
    def test_reference_values(self):
        # Vigna's splitmix64.c seeded with 1234567.
        rng = data.SplitMix64(1234567)
        self.assertEqual([rng.next() for _ in range(3)],
                         [6457827717110365317, 3203168211198807973, 9817491932198370423])

    def test_epoch_seed_wraps_to_64_bits(self):
        self.assertEqual(data.epoch_seed(5, 0), 5)
        self.assertEqual(data.epoch_seed(0, 1), 0x9E3779B97F4A7C15)
        self.assertEqual(data.epoch_seed(0, 2), (2 * 0x9E3779B97F4A7C15) % 2**64)
        with self.assertRaises(ValueError):
            data.epoch_seed(-1, 0)


class EpochPermutationTest(unittest.TestCase):
    def test_golden(self):
        self.assertEqual(data.epoch_permutation(0, 0, 10), [6, 3, 2, 9, 8, 1, 4, 7, 0, 5])
        self.assertEqual(data.epoch_permutation(42, 1, 10), [2, 3, 9, 7, 5, 8, 6, 4, 0, 1])
        self.assertEqual(data.epoch_permutation(2**64 - 1, 3, 7), [4, 6, 3, 0, 5, 2, 1])
        self.assertEqual(data.epoch_permutation(7, 0, 1), [0])
        self.assertEqual(data.epoch_permutation(7, 0, 0), [])

    def test_is_a_permutation_that_changes_per_epoch(self):
        a, b = (data.epoch_permutation(3, e, 1000) for e in (0, 1))
        self.assertEqual(sorted(a), list(range(1000)))
        self.assertEqual(sorted(b), list(range(1000)))
        self.assertNotEqual(a, b)


class BatchesTest(unittest.TestCase):
    def test_in_order_drops_the_last_incomplete_batch(self):
        self.assertEqual(list(data.batches(7, 3, 5)),
                         [[0, 1, 2], [3, 4, 5], [0, 1, 2], [3, 4, 5], [0, 1, 2]])

    def test_shuffled_epochs(self):
        self.assertEqual(list(data.batches(7, 3, 5, seed=5)),
                         [[2, 0, 5], [1, 6, 4], [5, 6, 4], [2, 0, 3], [6, 4, 3]])
        self.assertEqual(list(data.batches(7, 3, 5, seed=5, start_step=3)),
                         [[2, 0, 3], [6, 4, 3]])

    def test_too_few_samples(self):
        with self.assertRaises(ValueError):
            list(data.batches(2, 3, 1))


if __name__ == "__main__":
    unittest.main()
