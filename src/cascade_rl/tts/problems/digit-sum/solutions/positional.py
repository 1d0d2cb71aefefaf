# Full score: count, position by position, how often each digit occurs below N.
def digit_sum_total(n):
    digits = str(n)
    total, prefix = 0, 0
    for i, char in enumerate(digits):
        d, rest = int(char), len(digits) - i - 1
        free = rest * 45 * 10 ** (rest - 1) if rest else 0  # digit sums of all rest-digit suffixes
        total += d * (prefix * 10**rest + free) + d * (d - 1) // 2 * 10**rest
        prefix += d
    return total + prefix  # n itself


if __name__ == "__main__":
    print(digit_sum_total(int(input())))
