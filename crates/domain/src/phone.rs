//! Phone numbers in international format.

use phonenumber::Mode;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PhoneError {
    #[error("must start with + and the country code")]
    NeedsCountryCode,
    #[error("is a placeholder; put the recipient's phone number here")]
    Placeholder,
    #[error("is not a valid phone number")]
    Invalid,
}

impl PhoneError {
    /// The `details.reason` of the validation error, where the contract names one.
    pub fn reason(self) -> Option<&'static str> {
        match self {
            PhoneError::NeedsCountryCode => Some("to_needs_country_code"),
            PhoneError::Placeholder => Some("to_placeholder"),
            PhoneError::Invalid => None,
        }
    }
}

/// A parsed number: E.164 (`+14155552671`) and the network's `wa_id` form (digits only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Phone {
    pub e164: String,
}

impl Phone {
    pub fn wa_id(&self) -> &str {
        &self.e164[1..]
    }
}

/// Parses a number written as `+<country code> …` with optional spaces, dashes, dots and
/// parentheses. Placeholders (letters, `<`, `>`, `{`, `}`) are refused, as are numbers
/// without `+`.
pub fn parse_international(input: &str) -> Result<Phone, PhoneError> {
    let s = input.trim();
    if s.chars()
        .any(|c| c.is_alphabetic() || matches!(c, '<' | '>' | '{' | '}'))
    {
        return Err(PhoneError::Placeholder);
    }
    if !s.starts_with('+') {
        return Err(PhoneError::NeedsCountryCode);
    }
    if !s[1..]
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, ' ' | '-' | '.' | '(' | ')'))
    {
        return Err(PhoneError::Invalid);
    }
    let digits: String = s.chars().filter(char::is_ascii_digit).collect();
    if !(7..=15).contains(&digits.len()) {
        return Err(PhoneError::Invalid);
    }
    let parsed = phonenumber::parse(None, s).map_err(|_| PhoneError::Invalid)?;
    if !is_possible(&parsed) {
        return Err(PhoneError::Invalid);
    }
    Ok(Phone {
        e164: parsed.format().mode(Mode::E164).to_string(),
    })
}

/// Parses a `wa_id`: digits only, no `+`.
/// A possible number: a known country code and a national number of a length that country
/// uses. Whether the range is assigned is not asked (the network's test numbers, +1 555 …,
/// and documentation examples are possible but not "valid"); the network decides
/// deliverability.
fn is_possible(n: &phonenumber::PhoneNumber) -> bool {
    use phonenumber::Type;
    // The kinds of number a customer may write from or be reached at (not short codes or
    // emergency numbers); the metadata keeps possible lengths per kind.
    const KINDS: [Type; 9] = [
        Type::FixedLine,
        Type::Mobile,
        Type::TollFree,
        Type::PremiumRate,
        Type::SharedCost,
        Type::PersonalNumber,
        Type::Voip,
        Type::Pager,
        Type::Uan,
    ];
    // Every region of the country code: a number outside every assigned range matches no
    // region, and is still possible when its length is one the code uses.
    let Some(regions) = phonenumber::metadata::DATABASE.by_code(&n.code().value()) else {
        return false;
    };
    let Ok(len) = u16::try_from(n.national().to_string().len()) else {
        return false;
    };
    regions.iter().any(|meta| {
        let d = meta.descriptors();
        KINDS
            .into_iter()
            .filter_map(|k| d.get(k))
            .chain(std::iter::once(d.general()))
            .any(|desc| desc.possible_length().contains(&len))
    })
}

pub fn parse_wa_id(input: &str) -> Result<Phone, PhoneError> {
    if input.is_empty() || !input.bytes().all(|b| b.is_ascii_digit()) {
        return Err(PhoneError::Invalid);
    }
    parse_international(&format!("+{input}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_international_forms() {
        assert_eq!(
            parse_international("+14155552671").unwrap().e164,
            "+14155552671"
        );
        assert_eq!(
            parse_international("+44 20 7946 0958").unwrap().e164,
            "+442079460958"
        );
        assert_eq!(
            parse_international("+1-415-555-2671").unwrap().wa_id(),
            "14155552671"
        );
    }

    #[test]
    fn possible_numbers_are_accepted_without_asking_if_assigned() {
        // The network's test numbers and documentation examples.
        for n in ["+1 555 010 0123", "+1 555 555 0199", "+15550783881"] {
            let p = parse_international(n).unwrap_or_else(|e| panic!("{n}: {e}"));
            assert_eq!(p.e164.len(), 12, "{n}");
        }
        assert_eq!(parse_wa_id("15550100123").unwrap().e164, "+15550100123");
    }

    #[test]
    fn refuses_bad_forms() {
        assert_eq!(
            parse_international("14155552671"),
            Err(PhoneError::NeedsCountryCode)
        );
        assert_eq!(
            parse_international("+<RECIPIENT_PHONE>"),
            Err(PhoneError::Placeholder)
        );
        assert_eq!(
            parse_international("{{phone}}"),
            Err(PhoneError::Placeholder)
        );
        assert_eq!(parse_international("+999123"), Err(PhoneError::Invalid));
        // A known country, but a length it does not use.
        assert_eq!(
            parse_international("+1 415 555 26711"),
            Err(PhoneError::Invalid)
        );
        assert_eq!(parse_international("+44 20 79"), Err(PhoneError::Invalid));
        assert_eq!(
            parse_international("+1 415 555 2671 ext"),
            Err(PhoneError::Placeholder)
        );
        assert_eq!(parse_international("+"), Err(PhoneError::Invalid));
        assert_eq!(
            parse_international("+1_4155552671"),
            Err(PhoneError::Invalid)
        );
    }

    #[test]
    fn wa_ids() {
        assert_eq!(parse_wa_id("14155552671").unwrap().e164, "+14155552671");
        assert!(parse_wa_id("+14155552671").is_err());
        assert!(parse_wa_id("").is_err());
    }
}
