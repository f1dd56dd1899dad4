"""Characters that look like the ones of the reserved tag prefixes (``aws:``,
``capacity-broker:``) and that NFKC and case folding leave as they are: Cyrillic ``а``, Greek
``ο``, the hyphen U+2010, the ratio sign, … (``tags.is_reserved_key``).

Generated from Unicode's confusables (UTS #39 ``confusables.txt``) as the confusable-homoglyphs
package ships them (3.3.1); ``tests/unit/domain/test_lookalikes.py`` regenerates the table and
fails when this copy differs. A copy, not the package: the Lambdas run with the Powertools layer
alone, without the broker's other dependencies.
"""

from __future__ import annotations

# prototype -> the characters confusable with it (after NFKC and casefold)
LOOKALIKES: dict[str, str] = {
    "-": ("\u02d7\u06d4\u2010\u2011\u2012\u2013\u2014\u2043\u2212\u2796\u2cba\u2cbb\ufe58"),
    ":": (
        "\u02d0\u02f8\u0589\u05c3\u0703\u0704\u0903\u0a83\u16ec\u1803\u1809\u205a"
        "\u2236\ua4fd\ua789\ufe30"
    ),
    "a": (
        "\u0251\u0391\u03b1\u0410\u0430\u13aa\u15c5\u237a\ua4ee\U000102a0"
        "\U00016f40\U0001d6a8\U0001d6c2\U0001d6e2\U0001d6fc\U0001d71c\U0001d736"
        "\U0001d756\U0001d770\U0001d790\U0001d7aa"
    ),
    "b": (
        "\u0184\u0185\u0392\u03b2\u0412\u042c\u0432\u044c\u13cf\u13f4\u1472\u15af"
        "\u15f7\ua4d0\ua7b4\ua7b5\U00010282\U000102a1\U00010301\U0001d6a9"
        "\U0001d6e3\U0001d71d\U0001d757\U0001d791"
    ),
    "c": (
        "\u03c3\u03f2\u03f9\u0421\u0441\u13df\u1d04\u2ca4\u2ca5\ua4da\uabaf"
        "\U000102a2\U00010302\U00010415\U0001043d\U0001051c\U000118e9\U000118f2"
        "\U0001f74c"
    ),
    "e": (
        "\u0395\u03b5\u0415\u0435\u04bd\u13ac\u212e\u22ff\u2d39\ua4f0\uab32"
        "\U00010286\U000118a6\U000118ae\U000118c6\U000118ce\U0001d6ac\U0001d6e6"
        "\U0001d720\U0001d75a\U0001d794"
    ),
    "i": (
        "\u0131\u0269\u026a\u02db\u037a\u03b9\u0456\u04cf\u13a5\u1fbe\u2373\ua647"
        "\uab75\U000118c3\U0001d6a4\U0001d6ca\U0001d704\U0001d73e\U0001d778"
        "\U0001d7b2"
    ),
    "k": (
        "\u039a\u03ba\u041a\u043a\u13e6\u16d5\u2c94\u2c95\ua4d7\U00010518"
        "\U0001d6b1\U0001d6eb\U0001d725\U0001d75f\U0001d799"
    ),
    "o": (
        "\u039f\u03bf\u03c3\u041e\u043e\u0555\u0585\u05e1\u0647\u0665\u06be\u06c1"
        "\u06d5\u06f5\u07c0\u0966\u09e6\u0a66\u0ae6\u0b20\u0b66\u0be6\u0c02\u0c66"
        "\u0c82\u0ce6\u0d02\u0d20\u0d66\u0d82\u0e50\u0ed0\u101d\u1040\u10ff\u12d0"
        "\u1d0f\u1d11\u2c9e\u2c9f\u2d54\u3007\ua4f3\uab3d\ufba6\ufba7\ufba8\ufba9"
        "\ufbaa\ufbab\ufbac\ufbad\ufee9\ufeea\ufeeb\ufeec\U00010292\U000102ab"
        "\U00010404\U0001042c\U000104c2\U000104ea\U00010516\U000114d0\U000118b5"
        "\U000118c8\U000118d5\U000118d7\U000118e0\U0001d6b6\U0001d6d0\U0001d6d4"
        "\U0001d6f0\U0001d70a\U0001d70e\U0001d72a\U0001d744\U0001d748\U0001d764"
        "\U0001d77e\U0001d782\U0001d79e\U0001d7b8\U0001d7bc\U0001d7ce\U0001d7d8"
        "\U0001d7e2\U0001d7ec\U0001d7f6\U0001ee24\U0001ee64\U0001ee84\U0001fbf0"
    ),
    "p": (
        "\u03a1\u03c1\u03f1\u0420\u0440\u13e2\u146d\u2374\u2ca2\u2ca3\ua4d1"
        "\U00010295\U0001d6b8\U0001d6d2\U0001d6e0\U0001d6f2\U0001d70c\U0001d71a"
        "\U0001d72c\U0001d746\U0001d754\U0001d766\U0001d780\U0001d78e\U0001d7a0"
        "\U0001d7ba\U0001d7c8"
    ),
    "r": (
        "\u01a6\u0280\u0433\u13a1\u13b1\u13d2\u1587\u1d26\u2c85\ua4e3\uab47\uab48"
        "\uab81\U000104b4\U000104dc\U00016f35\U0001d216"
    ),
    "s": (
        "\u01bd\u0405\u0455\u054f\u057f\u13d5\u13da\ua4e2\ua731\uabaa\U00010296"
        "\U00010420\U00010448\U000118c1\U00016f3a"
    ),
    "t": (
        "\u03a4\u03c4\u0422\u0442\u13a2\u22a4\u27d9\u2ca6\u2ca7\ua4d4\U00010297"
        "\U000102b1\U00010315\U000118bc\U000118dc\U00016f0a\U0001d6bb\U0001d6f5"
        "\U0001d72f\U0001d769\U0001d7a3\U0001f768"
    ),
    "w": (
        "\u026f\u0461\u051c\u051d\u0561\u13b3\u13d4\u1d21\ua4ea\uab83\U0001170a"
        "\U0001170e\U0001170f\U000118e6\U000118ef"
    ),
    "y": (
        "\u0263\u028f\u03a5\u03b3\u03c5\u03d2\u0423\u0443\u04ae\u04af\u10e7\u13a9"
        "\u13bd\u1d8c\u1eff\u213d\u2ca8\u2ca9\ua4ec\uab5a\U000102b2\U000118a4"
        "\U000118c4\U000118dc\U00016f43\U0001d6bc\U0001d6c4\U0001d6f6\U0001d6fe"
        "\U0001d730\U0001d738\U0001d76a\U0001d772\U0001d7a4\U0001d7ac"
    ),
}
