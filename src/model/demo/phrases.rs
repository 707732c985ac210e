//! The offline model's own sentences in English, Spanish and Portuguese: scaffolding we wrote
//! around the catalog's words, never a tenant's copy (C9). The language is the tenant prompt's
//! (`prompt.md`, [`prompt_language`]); each language is an exhaustive `match`, so a sentence
//! without a translation does not compile.

use crate::config::Language;

/// One sentence (or template: `{}` takes the catalog's words) the demo model writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phrase {
    Refusal,
    BotYes,
    BotOffer,
    OnePrice,
    Prices,
    WhichOne,
    HoursInTotal,
    NoPriceChange,
    PaymentOptions,
    WouldOneWork,
    EnrolHere,
    SendDetails,
    WhichDetails,
    Greeting,
    KnowMore,
    Sending,
    TheLink,
    DetailsFor,
    TheDetails,
}

impl Phrase {
    #[cfg(test)]
    pub(super) const ALL: [Phrase; 19] = [
        Phrase::Refusal,
        Phrase::BotYes,
        Phrase::BotOffer,
        Phrase::OnePrice,
        Phrase::Prices,
        Phrase::WhichOne,
        Phrase::HoursInTotal,
        Phrase::NoPriceChange,
        Phrase::PaymentOptions,
        Phrase::WouldOneWork,
        Phrase::EnrolHere,
        Phrase::SendDetails,
        Phrase::WhichDetails,
        Phrase::Greeting,
        Phrase::KnowMore,
        Phrase::Sending,
        Phrase::TheLink,
        Phrase::DetailsFor,
        Phrase::TheDetails,
    ];
}

pub(super) fn say(language: Language, phrase: Phrase) -> &'static str {
    match language {
        Language::En => english(phrase),
        Language::Es => spanish(phrase),
        Language::Pt => portuguese(phrase),
    }
}

/// `phrase` with its `{}` slots filled in order.
pub(super) fn say_with(language: Language, phrase: Phrase, args: &[&str]) -> String {
    let mut out = String::new();
    let mut rest = say(language, phrase);
    let mut args = args.iter();
    while let Some(at) = rest.find("{}") {
        out.push_str(&rest[..at]);
        out.push_str(args.next().copied().unwrap_or_default());
        rest = &rest[at + 2..];
    }
    out.push_str(rest);
    out
}

fn english(phrase: Phrase) -> &'static str {
    match phrase {
        Phrase::Refusal => "I can't help with that. I can answer questions about what we offer.",
        Phrase::BotYes => "Yes, I'm an automated assistant.",
        Phrase::BotOffer => "Would you like me to pass you to a person?",
        Phrase::OnePrice => "Would you like the details?",
        Phrase::Prices => "Our prices:",
        Phrase::WhichOne => "Which one interests you?",
        Phrase::HoursInTotal => "{} hours in total",
        Phrase::NoPriceChange => "We don't change prices, but these payment options are available:",
        Phrase::PaymentOptions => "These payment options are available:",
        Phrase::WouldOneWork => "Would one of these work for you?",
        Phrase::EnrolHere => "You can enrol here:",
        Phrase::SendDetails => "Happy to send details. We offer: {}.",
        Phrase::WhichDetails => "Which one would you like the details for?",
        Phrase::Greeting => "Hi! We offer: {}.",
        Phrase::KnowMore => "Which one would you like to know more about?",
        Phrase::Sending => "I'm sending you {} now.",
        Phrase::TheLink => "the payment link",
        Phrase::DetailsFor => "the details for {}",
        Phrase::TheDetails => "the details",
    }
}

fn spanish(phrase: Phrase) -> &'static str {
    match phrase {
        Phrase::Refusal => {
            "No puedo ayudarte con eso. Puedo responder preguntas sobre lo que ofrecemos."
        }
        Phrase::BotYes => "Sí, soy un asistente automático.",
        Phrase::BotOffer => "¿Quieres que te pase con una persona?",
        Phrase::OnePrice => "¿Quieres más detalles?",
        Phrase::Prices => "Nuestros precios:",
        Phrase::WhichOne => "¿Cuál te interesa?",
        Phrase::HoursInTotal => "{} horas en total",
        Phrase::NoPriceChange => "No cambiamos los precios, pero tenemos estas formas de pago:",
        Phrase::PaymentOptions => "Tenemos estas formas de pago:",
        Phrase::WouldOneWork => "¿Alguna te sirve?",
        Phrase::EnrolHere => "Puedes inscribirte aquí:",
        Phrase::SendDetails => "Con gusto te envío los detalles. Ofrecemos: {}.",
        Phrase::WhichDetails => "¿De cuál quieres los detalles?",
        Phrase::Greeting => "¡Hola! Ofrecemos: {}.",
        Phrase::KnowMore => "¿Sobre cuál quieres saber más?",
        Phrase::Sending => "Te envío {} ahora.",
        Phrase::TheLink => "el enlace de pago",
        Phrase::DetailsFor => "los detalles de {}",
        Phrase::TheDetails => "los detalles",
    }
}

fn portuguese(phrase: Phrase) -> &'static str {
    match phrase {
        Phrase::Refusal => {
            "Não posso ajudar com isso. Posso responder perguntas sobre o que oferecemos."
        }
        Phrase::BotYes => "Sim, sou um assistente automático.",
        Phrase::BotOffer => "Quer que eu passe você para uma pessoa?",
        Phrase::OnePrice => "Quer mais detalhes?",
        Phrase::Prices => "Nossos preços:",
        Phrase::WhichOne => "Qual te interessa?",
        Phrase::HoursInTotal => "{} horas no total",
        Phrase::NoPriceChange => "Não mudamos os preços, mas temos estas formas de pagamento:",
        Phrase::PaymentOptions => "Temos estas formas de pagamento:",
        Phrase::WouldOneWork => "Alguma delas funciona para você?",
        Phrase::EnrolHere => "Você pode se inscrever aqui:",
        Phrase::SendDetails => "Posso enviar os detalhes. Oferecemos: {}.",
        Phrase::WhichDetails => "De qual você quer os detalhes?",
        Phrase::Greeting => "Olá! Oferecemos: {}.",
        Phrase::KnowMore => "Sobre qual você quer saber mais?",
        Phrase::Sending => "Estou enviando {} agora.",
        Phrase::TheLink => "o link de pagamento",
        Phrase::DetailsFor => "os detalhes de {}",
        Phrase::TheDetails => "os detalhes",
    }
}

/// Common words of each language, folded (lowercase, no accents), to tell a prompt's language.
#[rustfmt::skip]
const SPANISH: &[&str] = &[
    "el", "la", "los", "las", "que", "de", "del", "y", "en", "un", "una", "es", "por", "con",
    "para", "no", "se", "su", "eres", "responde", "tu", "al", "lo", "como", "pero", "muy",
];
#[rustfmt::skip]
const PORTUGUESE: &[&str] = &[
    "o", "a", "os", "as", "que", "de", "do", "da", "e", "em", "um", "uma", "voce", "por", "com",
    "para", "nao", "se", "seu", "sua", "responda", "no", "na", "como", "mas", "muito",
];
#[rustfmt::skip]
const ENGLISH: &[&str] = &[
    "the", "and", "you", "to", "of", "a", "in", "is", "for", "with", "your", "are", "not",
    "answer", "they", "it", "on", "what", "when", "be", "as",
];

/// The language `prompt` (the tenant's `prompt.md`, as the request's system text carries it
/// under `# TENANT PROMPT`) is written in: the language whose common words it uses most;
/// English on a tie or when it holds none.
pub fn prompt_language(prompt: &str) -> Language {
    let folded = super::matching::fold(prompt);
    let count = |list: &[&str]| {
        folded
            .split_whitespace()
            .filter(|w| list.contains(w))
            .count()
    };
    let (en, es, pt) = (count(ENGLISH), count(SPANISH), count(PORTUGUESE));
    if es > en && es > pt {
        Language::Es
    } else if pt > en && pt > es {
        Language::Pt
    } else {
        Language::En
    }
}

/// The tenant prompt's section of a request's system text (the whole text when it has no
/// section headers, as in a hand-made request).
pub(super) fn tenant_prompt(system: &str) -> &str {
    let start = system
        .find("# TENANT PROMPT")
        .map_or(0, |at| at + "# TENANT PROMPT".len());
    let rest = &system[start..];
    let end = rest.find("\n# ").unwrap_or(rest.len());
    &rest[..end]
}
